#!/usr/bin/env bash
# The whole test suite: set-up, a -Werror build + ctest, then an ASan/UBSan build + ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
./scripts/setup.sh
./scripts/fetch_vocab.sh >/dev/null   # real-vocab tokenizer tests
./scripts/fetch_spam.sh >/dev/null    # real SpamAssassin corpus checks
JOBS=$(nproc)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DVOLT_WERROR=ON >/dev/null
cmake --build build -j"$JOBS"
(cd build && ctest --output-on-failure -j"$JOBS" --timeout 900)
# the fuzz targets (clang, ASan+UBSan): regression inputs replayed, then each target for a
# fixed time (10 targets x VOLT_FUZZ_SECONDS, default 3 s: about half a minute plus the build;
# the regressions are the part that must never fail, longer runs are for finding new inputs)
if [ "${VOLT_SKIP_FUZZ:-0}" != 1 ]; then
  ./scripts/fuzz.sh "${VOLT_FUZZ_SECONDS:-3}"
fi
# The ASan/UBSan build runs the cuda backend on the CUDA simulator (tests/cudasim/README.md):
# the gpu tests (label gpu, cudasim) run there with sanitizers; the Release build above
# compiled the same kernels with nvcc. The simulator needs only the toolkit's headers.
if [ "${VOLT_SKIP_SANITIZE:-0}" != 1 ]; then
  SIM=OFF
  if [ -f "${CUDA_HOME:-/usr/local/cuda}/include/cublasLt.h" ]; then SIM=ON; else
    echo "test.sh: no CUDA toolkit headers: the gpu tests do not run on the simulator" >&2; fi
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DVOLT_WERROR=ON -DVOLT_SANITIZE=address,undefined -DVOLT_BUILD_BENCH=OFF \
        -DCMAKE_C_FLAGS="-O1" -DVOLT_CUDA_SIM=$SIM >/dev/null
  cmake --build build-asan -j"$JOBS"
  # Left to the Release build (CI time): the two DistilBERT runs on cpu-strict (ddp np2, fsdp
  # np3), the same code as their plain variants here and the small strict suites, about 75 s of
  # this build's wall time; and app_cli, the apps' command lines (its parser runs under ASan
  # here in fuzz_cli and every app test), 28 s. The benchmarks are not built here (no test runs them)
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS="suppressions=$ROOT/tests/lsan.supp:print_suppressions=0" ctest --output-on-failure -j"$JOBS" --timeout 1800 -E '^(test_bert_(ddp|fsdp)_np[23]_strict|app_cli)$')
fi
