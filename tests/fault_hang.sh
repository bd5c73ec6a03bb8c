#!/usr/bin/env bash
# A hung rank: fault_run's rank 1 stops itself (SIGSTOP) mid-fit. The job must end with an
# error within VOLT_COMM_TIMEOUT + 5 s (124 from timeout(1) would mean a hang).
# usage: fault_hang.sh MPIRUN FAULT_RUN STRATEGY TMPDIR
set -u
MPIRUN=$1 FR=$2 S=$3 TMP=$4
rm -rf "$TMP"; mkdir -p "$TMP"
TO=${VOLT_COMM_TIMEOUT:-3}
t0=$(date +%s%N)
timeout 60 "$MPIRUN" --oversubscribe -np 2 "$FR" hang "$TMP" "$S"
rc=$?
el_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "mpirun exit status $rc after ${el_ms} ms (VOLT_COMM_TIMEOUT=$TO s)"
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "FAIL: the job did not end with an error"; exit 1; }
# the limit: the timeout, + 5 s, + ~2 s of MPI start-up on a loaded 2-core machine
limit_ms=$(( (TO + 5 + 2) * 1000 ))
[ $el_ms -le $limit_ms ] || { echo "FAIL: took ${el_ms} ms, more than ${limit_ms} ms"; exit 1; }
echo "OK"
