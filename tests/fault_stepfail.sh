#!/usr/bin/env bash
# A rank that fails alone and ends: fault_run's rank 1 fails at a batch (its callback returns an
# error) and its program exits, as an app does. Its leave notice (strategies/comm/comm.h) must
# end the others within seconds, naming rank 1 and its error, not after VOLT_COMM_TIMEOUT.
# usage: fault_stepfail.sh MPIRUN FAULT_RUN STRATEGY TMPDIR [train|val [PATTERN]]
#   PATTERN: rank 0's error must also match it (the simulated NCCL: "NCCL communicator aborted")
set -u
MPIRUN=$1 FR=$2 S=$3 TMP=$4 IN=${5:-train} PAT=${6:-}
rm -rf "$TMP"; mkdir -p "$TMP"
TO=${VOLT_COMM_TIMEOUT:-20}
# timed from rank 1's failure (its line, read as it comes), not from the launch: MPI's start-up
# and the first batches take seconds of their own on a loaded 2-core machine (ASan)
FAULT_FAIL_IN=$IN timeout 60 "$MPIRUN" --oversubscribe -np 2 "$FR" stepfail "$TMP" "$S" 2>&1 |
    while IFS= read -r l; do
        printf '%s\n' "$l" >>"$TMP/out.txt"
        [[ $l == *"fault_run: rank 1: failing alone"* ]] && date +%s%N >"$TMP/failed_at"
    done
rc=${PIPESTATUS[0]}
t1=$(date +%s%N)
out=$(cat "$TMP/out.txt")
printf '%s\n' "$out" | grep -v '^warning:'
fail() { echo "FAIL: $*"; exit 1; }
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "the job did not end with an error (exit status $rc)"
[ -s "$TMP/failed_at" ] || fail "rank 1 never failed (start-up failure?)"
el_ms=$(( (t1 - $(cat "$TMP/failed_at")) / 1000000 ))
echo "mpirun exit status $rc ${el_ms} ms after rank 1 failed (VOLT_COMM_TIMEOUT=$TO s)"
grep -Eq "fault_run: rank 0: fit: communication error: .*rank 1 left the job after an error \(FailAlone: on_(train|validation)_batch_start failed" <<<"$out" ||
  fail "rank 0 did not fail naming rank 1's departure and error"
[ -z "$PAT" ] || grep -E "fault_run: rank 0: fit: .*$PAT" <<<"$out" >/dev/null || fail "rank 0's error does not match '$PAT'"
grep -q "timed out after" <<<"$out" && fail "a rank waited for the comm's timeout"
# the 2 s grace, + mpirun ending the job (~2 s), + margin: half the comm's timeout
limit_ms=$(( TO * 1000 / 2 ))
[ $el_ms -le $limit_ms ] || fail "took ${el_ms} ms after rank 1 failed, more than ${limit_ms} ms (half the comm's timeout)"
echo "OK"
