#!/usr/bin/env bash
# kill -9 at random points of a training run, resume, compare the final weights bitwise with
# an uninterrupted run (docs/RELIABILITY.md). Half the kills land at a seeded random time,
# half at a seeded random fsync (fault_run raises SIGKILL on itself there: inside a save,
# between the shard files and the index, or before a rename).
# usage: fault_kill.sh FAULT_RUN STRATEGY NP TMPDIR KILLS SEED [MPIRUN]
set -u
FR=$1 S=$2 NP=$3 TMP=$4 KILLS=$5 SEED=$6 MPIRUN=${7:-}
[ "${VOLT_TEST_QUICK:-0}" = 1 ] && [ "$KILLS" -gt 3 ] && KILLS=3   # the sanitizer build: fewer kills
RANDOM=$SEED
rm -rf "$TMP"; mkdir -p "$TMP"
export FAULT_BATCH_MS=${FAULT_BATCH_MS:-15} FAULT_FSYNC_MS=${FAULT_FSYNC_MS:-10}
launch() {   # launch ROOT [env...]: one run in its own process group, in the background
  local root=$1; shift
  if [ -n "$MPIRUN" ]; then setsid env "$@" "$MPIRUN" --oversubscribe -np "$NP" "$FR" fit "$root" "$S" >>"$root.log" 2>&1 &
  else setsid env "$@" "$FR" fit "$root" "$S" >>"$root.log" 2>&1 & fi
  PID=$!
}
kill_job() {   # kill -9 the run: mpirun puts each rank in a process group of its own, so the
  # group's kill reaches mpirun alone; its ranks are killed by parent pid first, and the resume
  # waits until none is left (an orphan would go on writing the checkpoint the resume reads)
  local root=$1 n=0
  [ -n "$MPIRUN" ] && pkill -KILL -P "$PID" 2>/dev/null
  kill -9 -- -"$PID" 2>/dev/null; wait $PID 2>/dev/null
  while pgrep -f -- " fit $root $S" >/dev/null && [ $n -lt 200 ]; do sleep 0.05; n=$((n + 1)); done
  ! pgrep -f -- " fit $root $S" >/dev/null || { echo "FAIL: a rank of $root outlived its kill"; exit 1; }
}
mkdir -p "$TMP/ref"
t0=$(date +%s%N)
launch "$TMP/ref"; wait $PID || { echo "FAIL: the uninterrupted run failed"; cat "$TMP/ref.log"; exit 1; }
run_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "uninterrupted run: ${run_ms} ms"
fails=0 resumed=0
for i in $(seq 1 "$KILLS"); do
  root="$TMP/k$i"; mkdir -p "$root"
  if [ $((i % 2)) -eq 1 ]; then
    at=$(( run_ms * 3 / 10 + RANDOM % (run_ms * 6 / 10 + 1) ))   # past start-up, with a margin at the end
    launch "$root"; sleep "$(awk "BEGIN{print $at/1000}")"
    kill_job "$root"
    how="at ${at} ms"
  else
    k=$(( RANDOM % 8 + 3 )); r=$(( RANDOM % NP ))
    launch "$root" FAULT_KILL_AT_FSYNC=$k FAULT_KILL_RANK=$r; wait $PID 2>/dev/null
    how="at fsync #$k of rank $r"
  fi
  n=0
  before=$(grep -c "training starts" "$root.log")
  until [ -f "$root/final.bin" ] || [ $n -ge 3 ]; do   # resume (from its newest last checkpoint)
    launch "$root"; wait $PID || echo "  resume $n of k$i exited non-zero"
    n=$((n + 1))
  done
  from=$(grep "training starts" "$root.log" | sed -n "$((before + 1))p" | sed 's/.*at step //')
  [ $n -eq 0 ] && { echo "kill $i ($how): the run finished first (not counted)"; continue; }
  [ "${from:-0}" -gt 0 ] && resumed=$((resumed + 1))
  if [ -f "$root/final.bin" ] && cmp -s "$root/final.bin" "$TMP/ref/final.bin"; then
    echo "kill $i ($how): resumed from step ${from:-?}, weights bitwise identical"
  else
    echo "FAIL: kill $i ($how): final weights differ or missing"; tail -20 "$root.log"; fails=$((fails + 1))
  fi
done
# a resume that ignored its checkpoint would also match: some must have started past step 0
[ $resumed -ge 1 ] || { echo "FAIL: no run resumed from a checkpoint"; fails=$((fails + 1)); }
[ $fails -eq 0 ] && echo "OK: $KILLS kills, $resumed resumed from a checkpoint" || exit 1
