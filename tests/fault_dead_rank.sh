#!/usr/bin/env bash
# test_fault_dead_rank_np3: rank 1 of 3 dies mid-fit (_exit(3) at batch 2, no MPI_Finalize).
# Passes only on the expected failure, seen in the output:
#   - rank 1 printed "rank 1: simulated crash" (the planned death happened: a usage error or a
#     crash at start-up never prints it), and
#   - either mpirun ended the job naming rank 1 (process [[job,1],1], exit code 3) and exited 3,
#     or the survivors returned VOLT_ERR_TIMEOUT ("timeout") naming the collective that timed out;
#   - never a hang (timeout(1)'s 124), a clean exit, or another rank's crash.
# usage: fault_dead_rank.sh MPIRUN TEST_STRATEGIES
set -u
mpirun=$1 ts=$2
out=$(timeout 60 "$mpirun" --oversubscribe -np 3 "$ts" fault_exit 2>&1)
rc=$?
printf '%s\n' "$out"
echo "mpirun exit status $rc"
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -ne 124 ] || fail "the job hung (killed by timeout after 60 s)"
[ "$rc" -ne 0 ] || fail "the job ended cleanly: a dead rank went unnoticed"
grep -q "rank 1: simulated crash" <<<"$out" || fail "rank 1 never reached its planned death (start-up failure?)"
grep -Eq "rank [02]: simulated crash|Segmentation fault|signal [0-9]+|usage: test_strategies" <<<"$out" &&
  fail "another failure than rank 1's death"
by_mpirun=0 by_timeout=0
if [ "$rc" -eq 3 ] && grep -Eq 'Process name: *\[\[[0-9]+,[0-9]+\],1\]' <<<"$out" &&
   grep -Eq 'Exit code: *3' <<<"$out"; then by_mpirun=1; fi
if grep -Eq 'rank [02]: fit returned timeout: .*timed out after' <<<"$out"; then by_timeout=1; fi
[ $by_mpirun = 1 ] || [ $by_timeout = 1 ] ||
  fail "neither mpirun's report of rank 1 (exit code 3) nor a survivor's VOLT_ERR_TIMEOUT naming the collective"
echo "fault_dead_rank: ok (ended by $([ $by_mpirun = 1 ] && echo "mpirun naming rank 1" || echo "the survivors' timeout"))"
