#!/usr/bin/env bash
# A hung rank: fault_run's rank 1 stops itself (SIGSTOP) mid-fit. The job must end with an
# error within VOLT_COMM_TIMEOUT + 7 s of the stop (124 from timeout(1) would mean a hang).
# usage: fault_hang.sh MPIRUN FAULT_RUN STRATEGY TMPDIR
set -u
MPIRUN=$1 FR=$2 S=$3 TMP=$4
rm -rf "$TMP"; mkdir -p "$TMP"
TO=${VOLT_COMM_TIMEOUT:-3}
# timed from the moment rank 1 stops (its line, read as it comes), not from the launch: MPI's
# start-up and the first batches take seconds of their own on a loaded 2-core machine (ASan)
timeout 60 "$MPIRUN" --oversubscribe -np 2 "$FR" hang "$TMP" "$S" 2>&1 |
    while IFS= read -r l; do
        printf '%s\n' "$l"
        [[ $l == *"SIGSTOP at batch 3"* ]] && date +%s%N >"$TMP/stopped_at"
    done
rc=${PIPESTATUS[0]}
t1=$(date +%s%N)
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "FAIL: the job did not end with an error (exit status $rc)"; exit 1; }
[ -s "$TMP/stopped_at" ] || { echo "FAIL: rank 1 never stopped (start-up failure?)"; exit 1; }
el_ms=$(( (t1 - $(cat "$TMP/stopped_at")) / 1000000 ))
echo "mpirun exit status $rc ${el_ms} ms after rank 1 stopped (VOLT_COMM_TIMEOUT=$TO s)"
# the limit: the timeout, + rank 0's finalize watchdog (2 s), + mpirun's SIGTERM then SIGKILL of
# the stopped rank (~2 s), + 3 s of margin; a wait for the default 300 s timeout fails it
limit_ms=$(( (TO + 2 + 2 + 3) * 1000 ))
[ $el_ms -le $limit_ms ] || { echo "FAIL: took ${el_ms} ms after the stop, more than ${limit_ms} ms"; exit 1; }
echo "OK"
