#!/usr/bin/env bash
# The fuzz step of CI (docs/RELIABILITY.md): build the libFuzzer targets (clang, ASan+UBSan)
# in build-fuzz, replay every regression input in tests/fuzz/regressions/<target>/, then run
# each target for a fixed time from its seeds (tests/fuzz/corpus/<target>/, never written:
# new inputs go to a scratch copy). A crash fails the step; the crashing input is left in
# build-fuzz/findings/<target>/ — add it to tests/fuzz/regressions/<target>/ with the fix.
#   scripts/fuzz.sh [SECONDS_PER_TARGET (default 10)] [TARGET ...]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECS=${1:-10}; shift || true
TARGETS=${*:-safetensors checkpoint idx text mail wordpiece vocab token_cache imdb cli}
command -v clang >/dev/null || { echo "fuzz: clang is missing (scripts/setup.sh installs it)"; exit 1; }
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DVOLT_FUZZ=ON -DVOLT_SANITIZE=address,undefined \
  -DCMAKE_C_FLAGS="-O1 -fsanitize=fuzzer-no-link" >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target volt_fuzz >/dev/null
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS="suppressions=$ROOT/tests/lsan.supp:print_suppressions=0" OMP_NUM_THREADS=1
[ -d /dev/shm ] && [ -w /dev/shm ] && export TMPDIR=${TMPDIR:-/dev/shm}   # scratch files: no disk syncs
export VOLT_FUZZ_VOCAB=${VOLT_FUZZ_VOCAB:-$HOME/.cache/volt/bert-base-uncased/vocab.txt}
status=0
for t in $TARGETS; do
  bin=build-fuzz/tests/fuzz_$t
  reg=tests/fuzz/regressions/$t
  if [ -d "$reg" ] && [ -n "$(ls -A "$reg")" ]; then
    "$bin" -runs=1 "$reg"/* >"build-fuzz/replay_$t.log" 2>&1 || { echo "fuzz: $t: a regression input fails again"; tail -30 "build-fuzz/replay_$t.log"; status=1; }
  fi
  work=build-fuzz/corpus/$t findings=build-fuzz/findings/$t
  rm -rf "$work"; mkdir -p "$work" "$findings"
  [ -d tests/fuzz/corpus/$t ] && cp tests/fuzz/corpus/$t/* "$work"/ 2>/dev/null || true
  if "$bin" -max_total_time="$SECS" -seed=1 -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -artifact_prefix="$findings/" "$work" >"build-fuzz/fuzz_$t.log" 2>&1; then
    echo "fuzz: $t: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "build-fuzz/fuzz_$t.log" | tail -1)"
  else
    echo "fuzz: $t: FAILED (input in $findings/)"; tail -40 "build-fuzz/fuzz_$t.log"; status=1
  fi
done
exit $status
