#!/usr/bin/env bash
# Ctrl-C on a self-launched job (cli/launch.c) and on scripts/volt-run: the launcher passes
# SIGINT / SIGTERM on to the ranks, which stop at the same step, save on_exception.safetensors
# and exit 130 / 143; the launcher exits with that status, and no rank outlives it.
# (Before: mpirun got the signal and aborted the job: SIGTERM to the ranks a second later,
# SIGKILL one more second later, exit 1; the save was sometimes cut short.)
#   launch_signal.sh TEXT_APP VOLT_RUN WORKDIR
set -uo pipefail
APP=${1:?text app}; VR=${2:?volt-run}; W=${3:?workdir}
rm -rf "$W" && mkdir -p "$W" || exit 1
die() { echo "launch_signal: FAILED: $*"; exit 1; }
printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]' the a movie film was good bad very >"$W/vocab.txt"
{ echo 'text,label'; for i in $(seq 0 39); do
    if ((i % 2)); then echo "\"the movie was very good\",1"; else echo "\"the film was very bad\",0"; fi; done; } >"$W/tiny.csv"
# job control, as in a terminal: a background job of a script without it starts with SIGINT
# ignored (POSIX), which a bash launcher (volt-run) cannot trap
set -m
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 VOLT_COMM_TIMEOUT=60 ASAN_OPTIONS=detect_leaks=0
unset OMPI_COMM_WORLD_SIZE PMI_SIZE PMIX_RANK PMI_RANK
# run NAME SIGNAL WANT_RC LAUNCHER...: start a long fit, wait for its first checkpoint, signal the launcher
run() {
    local name=$1 sig=$2 want=$3; shift 3
    local root="$W/$name"
    "$@" fit --data "csv:$W/tiny.csv" --vocab "$W/vocab.txt" --model-preset tiny --max-length 8 --cache-dir "$W/cache" \
        --root "$root" --workers 0 --trainer.strategy ddp --epochs 100000 --min-epochs 100000 --no-progress \
        >"$W/$name.log" 2>&1 &
    local pid=$! i
    for i in $(seq 240); do compgen -G "$root/checkpoints/*/epoch=*.safetensors" >/dev/null && break; sleep 0.25; done
    compgen -G "$root/checkpoints/*/epoch=*.safetensors" >/dev/null || { kill -KILL $pid; cat "$W/$name.log"; die "$name: no checkpoint in 60 s"; }
    kill -"$sig" $pid
    wait $pid
    local rc=$?
    local left
    left=$(pgrep -f -- "--root $root " || true)
    [ -z "$left" ] || { ps -o pid,stat,cmd -p "$(tr '\n' ',' <<<"$left" | sed 's/,$//')"; pkill -KILL -f -- "--root $root "; die "$name: ranks outlived the launcher"; }
    [ $rc -eq "$want" ] || { tail -30 "$W/$name.log"; die "$name: exit $rc after SIG$sig, want $want"; }
    [ "$(grep -c "OnExceptionCheckpoint: saved .*on_exception.safetensors" "$W/$name.log")" -eq 1 ] &&
        compgen -G "$root/checkpoints/*/on_exception.safetensors" >/dev/null || die "$name: no on_exception.safetensors"
    # rank 0 speaks for the job: "received" when the signal reached it before the step's vote,
    # "on another rank" when only rank 1 had it by then (both got it, a moment apart)
    grep -Eq "fit interrupted: SIG$sig \((received|on another rank)\)" "$W/$name.log" ||
        { tail -30 "$W/$name.log"; die "$name: no rank said it was interrupted by SIG$sig"; }
    echo "launch_signal: $name: SIG$sig -> exit $rc, on_exception.safetensors saved, no rank left"
}
run self_int INT 130 "$APP" --trainer.devices 2
run self_term TERM 143 "$APP" --trainer.devices 2
run volt_run_int INT 130 "$VR" -n 2 "$APP"
run volt_run_term TERM 143 "$VR" -n 2 "$APP"
echo "launch_signal: ok"
