#!/usr/bin/env bash
# volt-fashion-mnist under the distributed strategies, with --memory-report and
# --export-full (registered by tests/fashion.cmake; short runs of the real data).
#
#   app_fashion_dist.sh ref      VOLT_RUN APP CHECK WORKDIR   single (batch 32) and ddp on 2
#                                                             ranks (batch 16 per rank)
#   app_fashion_dist.sh STRATEGY VOLT_RUN APP CHECK WORKDIR   STRATEGY on 2 ranks, against ref's
#
# Same seed, same global batch (32), no dropout, one epoch of 12 steps: every strategy's
# exported weights must match single's to 1e-5 (they agree to ~2e-7 in practice). Each
# 2-rank run must print its informational lines once (rank 0 only), two memory tables with
# one row per rank, and the formula's optimizer state (halved by the sharded strategies).
# CHECK is tests/tools/app_check.c. Prints "app_fashion_dist <mode>: ok" when all passed.
set -uo pipefail
MODE=${1:?mode}
VOLT_RUN=${2:?volt-run}
APP=${3:?app}
CHECK=${4:?app_check}
W=${5:?workdir}
REF="$W/ref"
OUT="$W/$MODE"
rm -rf "$OUT" && mkdir -p "$OUT" || exit 1

die() { echo "app_fashion_dist $MODE: FAILED: $*"; exit 1; }

COMMON=(--model mlp --dropout 0 --epochs 1 --limit-train-batches 12 --limit-val-batches 2
        --limit-test-batches 2 --no-progress --workers 0 --memory-report)
MLP_NUMEL=235146   # docs/FASHION_MNIST.md
ADAM_STATES=2

# run NAME NP STRATEGY BATCH: the app's stdout in $OUT/NAME.log, stderr in $OUT/NAME.err
run() {
    local name=$1 np=$2 strategy=$3 batch=$4 rc
    local args=("${COMMON[@]}" --strategy "$strategy" --batch-size "$batch" --root "$OUT/$name"
                --export-full "$OUT/$name.safetensors")
    if [[ $np == 1 ]]; then "$APP" "${args[@]}" >"$OUT/$name.log" 2>"$OUT/$name.err"
    else "$VOLT_RUN" -n "$np" "$APP" "${args[@]}" >"$OUT/$name.log" 2>"$OUT/$name.err"; fi
    rc=$?
    [[ $rc == 0 ]] || { cat "$OUT/$name.log" "$OUT/$name.err"; die "$name: exit status $rc"; }
}

# once NAME PATTERN COUNT: PATTERN matches COUNT lines of NAME's stdout
once() {
    local n
    n=$(grep -cE -- "$2" "$OUT/$1.log")
    [[ $n == "$3" ]] || { cat "$OUT/$1.log"; die "$1: '$2' printed $n times, want $3"; }
}

check_output() {   # NAME: the informational lines once, two memory tables, the export said
    local name=$1
    once "$name" '^volt-fashion-mnist: mlp, ' 1
    once "$name" '^best checkpoint: ' 1
    once "$name" '^Test accuracy [01]\.[0-9]{4}$' 1
    once "$name" '^Time elapsed ' 1
    once "$name" '^logs: ' 1
    once "$name" '^exported the full weights ' 1
    grep -qF "exported the full weights (f32 safetensors) to $OUT/$name.safetensors" "$OUT/$name.log" ||
        die "$name: the export line does not name $OUT/$name.safetensors"
    once "$name" '^memory report: ' 2
    once "$name" '^after the first optimizer step \(step 1\):$' 1
    once "$name" '^after fit \(step 12\):$' 1
    [[ -s $OUT/$name.safetensors ]] || die "$name: no export at $OUT/$name.safetensors"
}

case "$MODE" in
ref)
    run single 1 single 32
    check_output single
    once single '^Accelerator: cpu \(device 0\), devices: 1, strategy: single$' 1
    "$CHECK" memtable "$OUT/single.log" 1 $ADAM_STATES 1 || die "single: memory table"
    "$CHECK" export "$OUT/single.safetensors" "$OUT/single.safetensors" 0 $MLP_NUMEL || die "single: export"
    run ddp 2 auto 16   # strategy "auto" under volt-run -n 2: ddp (Lightning's auto for several processes)
    check_output ddp
    once ddp '^Accelerator: cpu \(device 0\), devices: 1, strategy: ddp, ranks: 2$' 1   # volt-run -n 2: the world it launched
    grep -q 'batch 16 per rank x 2 ranks = 32 (ddp)' "$OUT/ddp.log" || die "ddp: the banner does not give the global batch"
    "$CHECK" memtable "$OUT/ddp.log" 2 $ADAM_STATES 1 || die "ddp: memory table"
    "$CHECK" export "$OUT/single.safetensors" "$OUT/ddp.safetensors" 1e-5 $MLP_NUMEL || die "ddp: export vs single"
    ;;
ddp|zero1|deepspeed_stage_1|zero2|deepspeed_stage_2|fsdp|fsdp_shard_grad_op)
    [[ -f $REF/single.safetensors && -f $REF/ddp.log ]] || die "run the 'ref' mode first (ctest fixture app_fashion_dist_ref)"
    run "$MODE" 2 "$MODE" 16
    check_output "$MODE"
    shards=2; [[ $MODE == ddp ]] && shards=1
    "$CHECK" memtable "$OUT/$MODE.log" 2 $ADAM_STATES $shards "$REF/ddp.log" || die "$MODE: memory table"
    "$CHECK" export "$REF/single.safetensors" "$OUT/$MODE.safetensors" 1e-5 $MLP_NUMEL || die "$MODE: export vs single"
    ;;
*) die "unknown mode '$MODE'" ;;
esac
echo "app_fashion_dist $MODE: ok"
