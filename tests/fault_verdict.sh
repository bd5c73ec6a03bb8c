#!/usr/bin/env bash
# test_fault_verdict_fsdp_np3: rank 1 of 3 stalls inside a sharded load past VOLT_COMM_TIMEOUT
# (test_strategies fault_verdict). Passes only when every rank's checks passed ("N passed, 0
# failed" three times, no "FAIL") and ranks 0 and 2 reported the load's timeout: the verdict
# they could not reach is an error naming the checkpoint, never a hang. The exit status may be
# the finalize watchdog's 1 (comm_mpi.c: a finalize after a broken collective is cut short) or 0.
# usage: fault_verdict.sh MPIRUN TEST_STRATEGIES STRATEGY CKPT
set -u
mpirun=$1 ts=$2 strategy=$3 ckpt=$4
out=$(timeout 60 "$mpirun" --oversubscribe -np 3 "$ts" fault_verdict "$strategy" "$ckpt" 2>&1)
rc=$?
printf '%s\n' "$out"
echo "mpirun exit status $rc"
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -ne 124 ] || fail "the job hung (killed by timeout after 60 s)"
grep -q "^FAIL" <<<"$out" && fail "a rank's check failed"
[ "$(grep -c '^[0-9]* passed, 0 failed' <<<"$out")" -eq 3 ] || fail "not every rank finished its checks"
for r in 0 2; do
  grep -Eq "rank $r: fit returned timeout after .*could not agree" <<<"$out" || fail "rank $r did not report the load's timeout"
done
[ "$rc" -eq 0 ] || grep -q "MPI_Finalize did not return after a communication failure" <<<"$out" ||
  fail "exit status $rc without the finalize watchdog's note"
echo "fault_verdict: ok"
