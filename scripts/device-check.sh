#!/bin/bash
# scripts/device-check.sh — the one script a GPU session runs (issue 11): probe the machine,
# build Release with CUDA, run the gpu-labelled tests, then the GPU bench; every result in
# one file. Budget: <= 5 minutes on an H200 (each stage under `timeout`, so one hang costs
# its stage, not the run).
#
#   scripts/device-check.sh                 # on the GPU machine, from the repo root
#   scripts/device-check.sh --fetch-deps    # HERE (a Debian/Ubuntu machine with apt), first:
#                                           # .deps/*.deb for the C dependencies
#
# Output: $OUT/device-check.out when OUT is set (the device tool brings $OUT back), else
# ./device-check.out; the lines starting with STAGE and RESULT are the summary.
#
# The GPU machine's image has nvcc, CMake, gcc and PyTorch + Lightning + transformers but
# maybe not our C dependencies (OpenBLAS, oneDNN, cJSON, zlib headers), and no network.
# Carry them as Debian packages unpacked with `dpkg -x` (no install, no root needed):
#   1. here:   scripts/device-check.sh --fetch-deps
#              (apt-get download of the packages in DEBS below into .deps/, ~20 MB; left
#              untracked and not ignored, they travel with the working tree: never commit
#              them; if .deps is ignored where you are, name it in the run's carry instead)
#   2. device: this script unpacks every .deps/*.deb into
#              /tmp/voltdeps (dpkg -x), rewrites the prefix of their pkg-config files and
#              points PKG_CONFIG_PATH, CMAKE_PREFIX_PATH and LD_LIBRARY_PATH there.
# The probe stage says which libraries the machine has; with none missing, .deps is not
# needed. Stages:
#   probe      nvidia-smi, nvcc, cmake, gcc, python's torch/lightning/transformers, the C libs
#   deps       .deps/*.deb unpacked (if present)
#   configure  cmake Release, VOLT_CUDA=ON, MPI off (not needed here), into build-gpu/
#   build      the library, the tests and bench_distilbert (-j all cores)
#   test       ctest -L gpu (cuda vs cpu: every op, attention and dropout, one DistilBERT training
#              step; compile: eager vs graph replay), test_nccl aside. All of these pass on the
#              CUDA simulator (tests/cudasim), so a failure here is the GPU's, not the test's.
#   nccl       tests/test_nccl (issue 12, docs/NCCL.md), <= 60 s: NCCL at world size 1 — init,
#              every collective in f32/bf16/f16, ordering after the compute stream, a forced
#              hang that must end in VOLT_ERR_TIMEOUT within its 2 s deadline, ddp / zero2 /
#              fsdp on cuda equal to single on cuda; one "nccl: <section>: ok|FAIL" line each
#   bench      bench/gpu/run.sh (volt on cuda vs the Lightning peer), BENCH_BUDGET_S seconds
#
# STAGES (default all: "probe deps configure build test nccl bench") picks stages, e.g. an early
# probe of a 15-minute session: STAGES="probe deps configure build test" (about 3 minutes).
# The build makes only what the stages run (BUILD_TARGETS: the gpu tests and
# bench_distilbert); BUILD_TARGETS=all builds everything.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
DEBS="libopenblas0-openmp libopenblas-openmp-dev libgfortran5 libdnnl2 libdnnl-dev ocl-icd-libopencl1
      libcjson1 libcjson-dev zlib1g-dev"

if [ "${1:-}" = "--fetch-deps" ]; then
  mkdir -p .deps && (cd .deps && apt-get download $DEBS) || { echo "apt-get download failed" >&2; exit 1; }
  du -sh .deps
  echo ".deps/ travels with the working tree (untracked); do not commit it"
  exit 0
fi

BUILD=${BUILD:-build-gpu}
RES=${OUT:+$OUT/device-check.out}
RES=${RES:-$ROOT/device-check.out}
: > "$RES"
T0=$(date +%s)
JOBS=$(nproc 2>/dev/null || echo 4)
CONFIGURE_S=${CONFIGURE_S:-60}
BUILD_S=${BUILD_S:-150}
TEST_S=${TEST_S:-120}
NCCL_S=${NCCL_S:-60}
BENCH_BUDGET_S=${BENCH_BUDGET_S:-180}
STAGES=" ${STAGES:-probe deps configure build test nccl bench} "
BUILD_TARGETS=${BUILD_TARGETS:-test_cuda_ops test_cuda_attention test_cuda_compile test_cuda_distilbert test_cuda_philox test_nccl bench_distilbert}
want() { [[ $STAGES == *" $1 "* ]]; }
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell} OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}

log() { echo "$*" | tee -a "$RES"; }
# stage NAME SECONDS CMD...: run under timeout, output into the file, one STAGE line.
# CMD may be a function of this script (timeout runs it in a child bash).
stage() {
  local name=$1 limit=$2 t=$(date +%s) rc
  shift 2
  log "==== $name (limit ${limit}s) $(date -u +%T)"
  if [ "$(type -t "$1")" = function ]; then
    timeout -k 10 "$limit" bash -c "$(declare -f "$1"); $*" >> "$RES" 2>&1
  else
    timeout -k 10 "$limit" "$@" >> "$RES" 2>&1
  fi
  rc=$?
  log "STAGE $name rc=$rc $(( $(date +%s) - t ))s$([ $rc = 124 ] && echo ' TIMED OUT')"
  return $rc
}

probe() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || echo "nvidia-smi: none"
  echo "nvcc: $(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || echo missing)"
  (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null | tail -1
  echo "cmake: $(cmake --version 2>/dev/null | head -1 || echo missing)"
  echo "gcc: $(gcc --version 2>/dev/null | head -1 || echo missing)"
  echo "pkg-config: $(command -v pkg-config || echo missing)"
  for pc in openblas libcjson dnnl zlib; do
    echo "pkg-config $pc: $(pkg-config --modversion $pc 2>/dev/null || echo missing)"
  done
  for lib in libopenblas libdnnl libcjson libz libgomp libcublasLt libcudart libnccl; do
    echo "ldconfig $lib: $(ldconfig -p 2>/dev/null | grep -m1 "$lib\.so" | awk '{print $NF}' || true)"
  done
  for h in cblas.h oneapi/dnnl/dnnl.h cjson/cJSON.h zlib.h; do
    f=$(find /usr/include /usr/local/include -path "*$h" 2>/dev/null | head -1)
    echo "header $h: ${f:-missing}"
  done
  ${PYTHON:-python3} - <<'PY' 2>&1
import importlib
for m in ("torch", "lightning", "transformers"):
    try:
        mod = importlib.import_module(m)
        print(f"python {m}: {mod.__version__}")
    except Exception as e:
        print(f"python {m}: missing ({e})")
import torch
print("python torch.cuda:", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
PY
  echo "toolkit libnccl: $(ls /usr/local/cuda/lib64/libnccl.so* /usr/local/cuda/lib/libnccl.so* 2>/dev/null | tr '\n' ' ')"
  echo "ls .deps: $(ls .deps 2>/dev/null | tr '\n' ' ')"
}

deps() {
  local P=/tmp/voltdeps
  ls .deps/*.deb >/dev/null 2>&1 || { echo "no .deps/*.deb carried: using the system's libraries"; return 0; }
  mkdir -p $P
  for f in .deps/*.deb; do dpkg -x "$f" $P && echo "unpacked $f"; done
  # pkg-config files say prefix=/usr: point them into the unpacked tree
  find $P -name '*.pc' -exec sed -i -E "s#^(prefix|exec_prefix|libdir|includedir)=/usr#\1=$P/usr#" {} +
  echo "PKG_CONFIG_PATH=$P/usr/lib/x86_64-linux-gnu/openblas-openmp/pkgconfig:$P/usr/lib/x86_64-linux-gnu/pkgconfig"
}

log "device-check $(git rev-parse --short HEAD 2>/dev/null) $(date -u +%FT%TZ) on $(hostname)"
want probe && stage probe 30 probe
want deps && stage deps 30 deps
if ls .deps/*.deb >/dev/null 2>&1; then
  P=/tmp/voltdeps
  export PKG_CONFIG_PATH="$P/usr/lib/x86_64-linux-gnu/openblas-openmp/pkgconfig:$P/usr/lib/x86_64-linux-gnu/pkgconfig:${PKG_CONFIG_PATH:-}"
  export CMAKE_PREFIX_PATH="$P/usr:${CMAKE_PREFIX_PATH:-}"
  export CPATH="$P/usr/include:$P/usr/include/x86_64-linux-gnu/openblas-openmp:${CPATH:-}"
  export LD_LIBRARY_PATH="$P/usr/lib/x86_64-linux-gnu/openblas-openmp:$P/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  export LIBRARY_PATH="$P/usr/lib/x86_64-linux-gnu/openblas-openmp:$P/usr/lib/x86_64-linux-gnu:${LIBRARY_PATH:-}"
fi
export PATH="$PATH:/usr/local/cuda/bin"
ok=1
if want configure; then
  stage configure "$CONFIGURE_S" cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DVOLT_CUDA=ON -DVOLT_MPI=OFF \
    -DCMAKE_CUDA_COMPILER=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) || ok=0
fi
targets=()
[ "$BUILD_TARGETS" = all ] || for t in $BUILD_TARGETS; do targets+=(--target "$t"); done
if [ $ok = 1 ] && want build; then stage build "$BUILD_S" cmake --build "$BUILD" -j "$JOBS" "${targets[@]}" || ok=0; fi
# tests on this run's build, or on one a warm machine kept from an earlier call
[ -d "$BUILD/tests" ] || ok=0
if [ $ok = 1 ]; then
  # -V: every test's output (the per-case errors), not only the failing ones
  want test && (cd "$BUILD" && stage test "$TEST_S" ctest -L gpu -E '^test_nccl$' -V --timeout "$TEST_S")
  # NCCL at world size 1 (no MPI in this build: a process is a world of one). NCCL_DEBUG=WARN
  # puts NCCL's own reason next to ours when something fails.
  n0=$(wc -l < "$RES")
  want nccl && stage nccl "$NCCL_S" env NCCL_DEBUG=WARN VOLT_TEST_TMP=/tmp/volt-nccl "$BUILD/tests/test_nccl"
  tail -n +$((n0 + 1)) "$RES" | grep -E "^(nccl: |FAIL|SKIP|[0-9]+ passed)" | sed 's/^/RESULT nccl: /' >> "$RES.tmp" || true
  grep -E "^([0-9]+: )?(B[0-9]|dropout n=|checking|compile |SKIP|FAIL|[0-9]+ passed|[0-9]+% tests passed)|tests passed|\*\*\*" \
    "$RES" | sed 's/^/RESULT test: /' >> "$RES.tmp" || true
  [ -f "$RES.tmp" ] && cat "$RES.tmp" >> "$RES" && rm -f "$RES.tmp"
else
  log "RESULT no build (failed or not made): no tests, no volt bench (the peer still runs)"
fi
want bench && stage bench $((BENCH_BUDGET_S + 20)) env BUILD="$ROOT/$BUILD" BUDGET_S="$BENCH_BUDGET_S" bash bench/gpu/run.sh
log "==== summary"
grep -E "^(STAGE|RESULT)" "$RES" > "$RES.sum"; cat "$RES.sum"; rm -f "$RES.sum"
log "total $(( $(date +%s) - T0 ))s; results in $RES"
