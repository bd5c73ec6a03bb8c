#!/bin/bash
# scripts/device-check.sh — the one script a GPU session runs (issue 11): probe the machine,
# build Release with CUDA, run the gpu-labelled tests, then the GPU bench; every result in
# one file. Budget: <= 5 minutes on an H200 (each stage under `timeout`, so one hang costs
# its stage, not the run).
#
#   scripts/device-check.sh                 # on the GPU machine, from the repo root
#   scripts/device-check.sh --fetch-deps    # HERE (a Debian/Ubuntu machine with apt), first:
#                                           # .deps/*.deb for the C dependencies
#   DEVICE_CHECK_SIM=1 JOBS=2 scripts/device-check.sh   # HERE: the dry run, every stage on the
#                                           # CUDA simulator (~12 min; docs/CUDA.md)
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
#   bench      bench/gpu/run.sh (volt on cuda vs the Lightning peer), BENCH_BUDGET_S seconds (150)
#   job        (not in the default list: name it) bench/gpu/seed_job.sh — the seed's whole job as a user
#              runs it, timed from process start to exit: volt-text-classification fit with seed.json on
#              a made-up IMDB-sized corpus (bench/gpu/make_imdb.py; the vocab from .deps/vocab.txt),
#              bf16-mixed + compile, 3 epochs, best checkpoint, test; JOB_S seconds (default 240;
#              the target is 60); its line is "RESULT job: run 1: ... wall_s=..."
#   tuner      (not in the default list: name it) the batch size finder on the real device: the text app
#              on a 2,000-text corpus at the seed shape (512 tokens, bf16-mixed, eager) with
#              --tuner.scale_batch_size power, two steps a trial (the first grows the step's arena,
#              the second runs in it), until cudaMallocAsync runs out (about 1 minute); "RESULT
#              tuner: scale_batch_size (power): 2 4 ... (out of memory); batch size N for fit", and
#              fit then trains 3 batches of N. Real out-of-memory on
#              the GPU and the step's memory coming back after it; TUNER_S seconds (default 150)
#   profile    VOLT_PROFILE=1 bench_distilbert at the seed shape, bf16-mixed eager, 3 steps: where a
#              step's time goes, per op (each op synchronized: launch gaps inflate small ops);
#              then PyTorch's attention at the same shape (bench/gpu/peer_attention.py: SDPA per
#              backend, "RESULT attn peer: ..."), the reference for the attention rows; <= 90 s;
#              the table rows are "RESULT profile: | op | ..."
#   sanitize   (not in the default list: name it) compute-sanitizer, when the machine has it: memcheck over
#              test_cuda_ops (every op, out-of-bounds and misaligned accesses), racecheck and synccheck
#              over the attention kernels (test_cuda_attention with VOLT_TEST_QUICK=1: the f32 and
#              tensor-core kernels at partial tiles; shared-memory hazards and barrier misuse, which the
#              simulator's thread order can miss); SANITIZE_S seconds (default 120); one line per tool,
#              "RESULT sanitize: <tool> <test>: ERROR SUMMARY: N errors" (any error fails the stage)
#   scaling    bench/bench_nccl (issue 12): NCCL all_reduce of the model's grad buckets at world
#              size 1 (measured), then ddp / zero2 / fsdp at N = 2, 4, 8 PROJECTED from the bench's
#              bf16-mixed+compile step time and an assumed NVLink bus bandwidth, <= 60 s
#
# STAGES (default all but job and sanitize: "probe deps configure build test nccl bench profile scaling")
# picks stages, e.g. an early probe of a 15-minute session: STAGES="probe deps configure build test
# sanitize" (about 4 minutes), then STAGES="test nccl bench job profile scaling" (about 7 minutes).
# The build makes only what the stages run (BUILD_TARGETS: the gpu tests and
# bench_distilbert); BUILD_TARGETS=all builds everything.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
DEBS="libopenblas0-openmp libopenblas-openmp-dev libgfortran5 libdnnl2 libdnnl-dev ocl-icd-libopencl1
      libcjson1 libcjson-dev zlib1g-dev"

if [ "${1:-}" = "--fetch-deps" ]; then
  mkdir -p .deps && (cd .deps && apt-get download $DEBS) || { echo "apt-get download failed" >&2; exit 1; }
  # nccl.h (self-contained, 25 KB): the build's NCCL header when the GPU machine has none of
  # its own (its NCCL may be a Python wheel's library only); the library is loaded at run time
  for h in /usr/local/cuda/include/nccl.h /usr/include/nccl.h; do
    [ -f "$h" ] && { mkdir -p .deps/include && cp "$h" .deps/include/ && echo "copied $h"; break; }
  done
  # the WordPiece vocab for the job stage's corpus and tokenizer (the GPU machine has no network)
  ./scripts/fetch_vocab.sh >/dev/null && cp "$HOME/.cache/volt/bert-base-uncased/vocab.txt" .deps/vocab.txt &&
    echo "copied the bert-base-uncased vocab to .deps/vocab.txt"
  du -sh .deps
  echo ".deps/ travels with the working tree (untracked); do not commit it"
  exit 0
fi

# Simulator mode (DEVICE_CHECK_SIM=1 or --sim; docs/CUDA.md "Dry run on the simulator"): every
# stage as on the GPU, but configured with -DVOLT_CUDA_SIM=ON (tests/cudasim: the runtime,
# cuBLASLt and NCCL on the CPU), the simulated libraries named in the environment as
# tests/gpu_sim.cmake does, longer limits, and a small bench (the sim runs ~1 us per GPU
# thread per launch). Same commands, same parsing, same RESULT lines, same output file.
SIM=${DEVICE_CHECK_SIM:-0}
[ "${1:-}" = "--sim" ] && SIM=1
if [ "$SIM" = 1 ]; then
  BUILD=${BUILD:-build-devsim}
  CONFIGURE_S=${CONFIGURE_S:-180} BUILD_S=${BUILD_S:-2400} TEST_S=${TEST_S:-1800} NCCL_S=${NCCL_S:-600}
  BENCH_BUDGET_S=${BENCH_BUDGET_S:-900}
  # bench/gpu/run.sh's shape knobs: DistilBERT preset "small" (2 layers, dim 128, head dim 64: the
  # fused attention's only one; "tiny" has 8), 2 x 64 tokens, 3 steps (~40 s for the three volt
  # rows); the peer: its --tiny model on the CPU
  export VOLT_PRESET=${VOLT_PRESET:-small} BATCH=${BATCH:-2} SEQ=${SEQ:-64} STEPS=${STEPS:-3} WARMUP=${WARMUP:-2}
  export PEER_ARGS=${PEER_ARGS:---tiny --cpu}
  export ATTN_PEER_ARGS=${ATTN_PEER_ARGS:---tiny --cpu}
  # the job stage's shape: 48 texts of at most 32 tokens, the small preset, one epoch
  export JOB_TEXTS=${JOB_TEXTS:-48} JOB_SEQ=${JOB_SEQ:-32} JOB_PRESET=${JOB_PRESET:-small} JOB_EPOCHS=${JOB_EPOCHS:-1}
  export JOB_BATCH=${JOB_BATCH:-4} JOB_S=${JOB_S:-900}
  # the tuner stage's: the small preset on a simulated GPU of TUNER_SIM_MEM_MB, so a trial runs out
  export TUNER_TEXTS=${TUNER_TEXTS:-3000} TUNER_SEQ=${TUNER_SEQ:-32} TUNER_PRESET=${TUNER_PRESET:-small}
  export TUNER_S=${TUNER_S:-900} TUNER_SIM_MEM_MB=${TUNER_SIM_MEM_MB:-300}
fi
BUILD=${BUILD:-build-gpu}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac   # absolute: the test stage runs in it, the bench gets it
# the nccl stage runs test_nccl; the simulator build adds the text app on cuda (label gpu, 15 min)
TEST_EXCLUDE='^test_nccl$'
[ "$SIM" = 1 ] && TEST_EXCLUDE='^(test_nccl|app_text_classification_cuda)$'
# absolute: the test stage runs in $BUILD; an OUT that does not exist yet is made (without it
# `cd` failed and the file went to /device-check.out)
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT" || { echo "device-check: cannot make OUT=$OUT" >&2; exit 1; }; fi
RES=${OUT:+$(cd "$OUT" && pwd)/device-check.out}
RES=${RES:-$ROOT/device-check.out}
: > "$RES"
T0=$(date +%s)
# nproc counts OMP_NUM_THREADS (exported below, maybe set by the image): not the cores
JOBS=${JOBS:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 4)}
CONFIGURE_S=${CONFIGURE_S:-60}
BUILD_S=${BUILD_S:-150}
TEST_S=${TEST_S:-120}
NCCL_S=${NCCL_S:-60}
BENCH_BUDGET_S=${BENCH_BUDGET_S:-150}   # with the estimates in docs/CUDA.md: ~5 min in all
STAGES=" ${STAGES:-probe deps configure build test nccl bench profile scaling} "
BUILD_TARGETS=${BUILD_TARGETS:-test_cuda_ops test_cuda_attention test_cuda_compile test_cuda_distilbert test_cuda_memstat test_cuda_philox test_nccl test_nccl_graph bench_distilbert bench_nccl volt-text-classification}
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
  local gpu miss="" h f lib
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1) ||
    gpu="none (nvidia-smi: ${gpu##*: })"
  echo "nvidia-smi: $gpu"
  echo "nvcc: $(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || echo missing)"
  (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null | tail -1
  echo "cmake: $(cmake --version 2>/dev/null | head -1 || echo missing)"
  echo "gcc: $(gcc --version 2>/dev/null | head -1 || echo missing)"
  echo "pkg-config: $(command -v pkg-config || echo missing)"
  for pc in openblas libcjson zlib; do
    echo "pkg-config $pc: $(pkg-config --modversion $pc 2>/dev/null || echo missing)"
  done
  echo "pkg-config dnnl: (Debian ships no dnnl.pc: cmake/deps.cmake finds the header and library)"
  for lib in libopenblas libdnnl libcjson libz libgomp libgfortran libcublasLt libcudart libnccl; do
    f=$(ldconfig -p 2>/dev/null | grep "$lib\.so" | awk '{print $NF}' | while read -r x; do
        [ -s "$x" ] && { echo "$x"; break; }; done)   # -s: a file behind the name (ldconfig's cache can be stale)
    echo "ldconfig $lib: ${f:-missing}"
    case $lib in libopenblas|libdnnl|libcjson|libgomp) [ -n "$f" ] || miss+=" $lib.so";; esac
  done
  # the exact places the build looks (not a find over /usr/include: node ships its own zlib.h)
  for h in cblas.h oneapi/dnnl/dnnl.h cjson/cJSON.h zlib.h; do
    f=$(for x in /usr/include/$h /usr/local/include/$h /usr/include/x86_64-linux-gnu/openblas-openmp/$h \
        /usr/include/x86_64-linux-gnu/$h; do [ -s "$x" ] && { echo "$x"; break; }; done)
    echo "header $h: ${f:-missing}"
    [ -n "$f" ] || miss+=" $h"
  done
  ${PYTHON:-python3} - <<'PY' 2>&1
import importlib
have = {}
for m in ("torch", "lightning", "transformers"):
    try:
        have[m] = importlib.import_module(m)
        print(f"python {m}: {have[m].__version__}")
    except Exception as e:
        print(f"python {m}: missing ({e})")
torch = have.get("torch")
cuda = torch is not None and torch.cuda.is_available()
print("python torch.cuda:", (torch.cuda.get_device_name(0) + ", cuda " + str(torch.version.cuda)) if cuda else "no")
print("RESULT probe: python " + " ".join(f"{m}={getattr(have.get(m), '__version__', 'missing')}"
                                          for m in ("torch", "lightning", "transformers"))
      + f" torch.cuda={'yes' if cuda else 'no'}")
PY
  echo "toolkit libnccl: $(ls /usr/local/cuda/lib64/libnccl.so* /usr/local/cuda/lib/libnccl.so* 2>/dev/null | tr '\n' ' ')"
  echo "ls .deps: $(ls .deps 2>/dev/null | tr '\n' ' ')"
  echo "RESULT probe: gpu: $gpu"
  # CUDA 13's runtime (what volt is built with) needs driver 580 or newer: an older driver makes
  # cudaGetDeviceCount fail, every gpu test would SKIP ("no CUDA device") and look green
  local drv
  drv=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
  if [ -n "$drv" ] && [ "${drv%%.*}" -lt 580 ] 2>/dev/null; then
    echo "RESULT probe: FAIL driver $drv is older than CUDA 13's minimum (580): the gpu tests would all skip"
  fi
  echo "RESULT probe: nvcc $( (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>/dev/null | grep -o 'release [0-9.]*' || echo missing)," \
    "$(cmake --version 2>/dev/null | head -1 || echo 'cmake missing'), $(env -u OMP_NUM_THREADS nproc) cores;" \
    "C deps missing on the system:${miss:- none}; .deps: $(ls .deps/*.deb 2>/dev/null | wc -l) .deb"
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

# The test stage's lines for the summary (ctest -V prefixes a test's output with "<number>: "):
# per test its name, ctest's verdict and seconds, its "N passed, M failed" line, the lines
# that carry the issue's numbers (a DistilBERT step against the CPU, eager vs graph replay),
# and its first 5 FAIL/SKIP lines; then ctest's total. The per-case lines stay in the body.
summarize_tests() {
  sed -n '/^==== test /,/^STAGE test /p' "$1" | awk '
    /^ *Start +[0-9]+: / { sub(":", "", $2); name[$2] = $3; next }
    match($0, /^[0-9]+: /) {
      id = substr($0, 1, RLENGTH - 2); msg = substr($0, RLENGTH + 1); n = name[id] ? name[id] : "#" id
      if (msg ~ /^[0-9]+ passed, [0-9]+ failed/ || msg ~ /^(distilbert step|compile )/)
        print "RESULT test: " n ": " substr(msg, 1, 200)
      else if (msg ~ /^(FAIL|SKIP)/ && nf[id]++ < 5) print "RESULT test: " n ": " substr(msg, 1, 200)
      next }
    / Test +#[0-9]+: / { sub(/^ *[0-9]+\/[0-9]+ +/, ""); gsub(/ \.+ */, " "); print "RESULT test: ctest " $0; next }
    /tests passed, [0-9]+ tests failed/ { print "RESULT test: " $0 }'
}

log "device-check $(git rev-parse --short HEAD 2>/dev/null) $(date -u +%FT%TZ) on $(hostname)"
want probe && stage probe 30 probe
want deps && stage deps 30 deps
# what the deps stage unpacked (this call or an earlier one on a still-warm machine)
if ls .deps/*.deb >/dev/null 2>&1 && [ -d /tmp/voltdeps/usr ]; then
  P=/tmp/voltdeps
  export PKG_CONFIG_PATH="$P/usr/lib/x86_64-linux-gnu/openblas-openmp/pkgconfig:$P/usr/lib/x86_64-linux-gnu/pkgconfig:${PKG_CONFIG_PATH:-}"
  export CMAKE_PREFIX_PATH="$P/usr:${CMAKE_PREFIX_PATH:-}"
  export CPATH="$P/usr/include:$P/usr/include/x86_64-linux-gnu/openblas-openmp:${CPATH:-}"
  export LD_LIBRARY_PATH="$P/usr/lib/x86_64-linux-gnu/openblas-openmp:$P/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  export LIBRARY_PATH="$P/usr/lib/x86_64-linux-gnu/openblas-openmp:$P/usr/lib/x86_64-linux-gnu:${LIBRARY_PATH:-}"
fi
export PATH="$PATH:/usr/local/cuda/bin"
# The CUDA pieces the build and the run need may sit outside the toolkit and the loader's
# path on the GPU machine (its image ships cuBLAS and NCCL as Python wheels for PyTorch):
# found here once, handed to cmake as include dirs and to the programs as VOLT_CUBLASLT /
# VOLT_NCCL (core/cuda/gemm.c, strategies/comm/nccl/nccl_lib.c). Not on the simulator.
CMAKE_EXTRA=()
locate_cuda() {
  local roots site f lib var hdr inc
  site=$(${PYTHON:-python3} -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  roots="$site /usr/local /opt"
  for lib in libcublasLt.so.13:VOLT_CUBLASLT libnccl.so.2:VOLT_NCCL; do
    var=${lib#*:} lib=${lib%%:*}
    if [ -n "${!var:-}" ]; then log "locate $lib: \$$var=${!var}"; continue; fi
    # the loader's cache names files that may be gone: a file must be behind the name
    f=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l { print $NF }' | while read -r x; do
        [ -s "$x" ] && { echo "$x"; break; }; done)
    [ -z "$f" ] && [ -s /usr/local/cuda/lib64/$lib ] && f=/usr/local/cuda/lib64/$lib
    if [ -n "$f" ]; then log "locate $lib: $f (the loader's path or the toolkit)"; continue; fi
    f=$(timeout 30 find $roots -name "$lib" -not -path '*/proc/*' 2>/dev/null | head -1)
    if [ -n "$f" ]; then export "$var=$f"; log "locate $lib: $f (\$$var)"; else log "locate $lib: NOT FOUND"; fi
  done
  for hdr in cublasLt.h:VOLT_CUBLASLT_INCLUDE nccl.h:VOLT_NCCL_INCLUDE; do
    var=${hdr#*:} hdr=${hdr%%:*}
    if [ -f /usr/local/cuda/include/$hdr ] || [ -f /usr/include/$hdr ]; then log "locate $hdr: system"; continue; fi
    f=$(timeout 30 find $roots -name "$hdr" -path '*include*' -not -path '*/proc/*' 2>/dev/null | head -1)
    [ -z "$f" ] && [ -f "$ROOT/.deps/include/$hdr" ] && f=$ROOT/.deps/include/$hdr
    if [ -n "$f" ]; then inc=$(dirname "$f"); CMAKE_EXTRA+=("-D$var=$inc"); log "locate $hdr: $inc (-D$var)"
    else log "locate $hdr: NOT FOUND (the build goes without $([ $hdr = nccl.h ] && echo NCCL || echo CUDA))"; fi
  done
}
[ "$SIM" = 1 ] || locate_cuda
ok=1
if want configure; then
  stage configure "$CONFIGURE_S" cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DVOLT_CUDA=ON -DVOLT_MPI=OFF \
    -DCMAKE_CUDA_COMPILER=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) "${CMAKE_EXTRA[@]}" \
    $([ "$SIM" = 1 ] && echo -DVOLT_CUDA_SIM=ON) || ok=0
fi
targets=()
[ "$BUILD_TARGETS" = all ] || for t in $BUILD_TARGETS; do targets+=(--target "$t"); done
if [ "$SIM" = 1 ]; then   # the simulated cuBLASLt and NCCL are loaded at run time: no target depends on them
  [ "$BUILD_TARGETS" = all ] || targets+=(--target volt_cudasim_cublasLt --target volt_cudasim_nccl)
  export CUDASIM=1 VOLT_CUBLASLT="$BUILD/libvolt_cudasim_cublasLt.so" VOLT_NCCL="$BUILD/libvolt_cudasim_nccl.so"
fi
if [ $ok = 1 ] && want build; then stage build "$BUILD_S" cmake --build "$BUILD" -j "$JOBS" "${targets[@]}" || ok=0; fi
# tests on this run's build, or on one a warm machine kept from an earlier call
[ -d "$BUILD/tests" ] || ok=0
if [ $ok = 1 ]; then
  # -V: every test's output (the per-case errors), not only the failing ones
  want test && (cd "$BUILD" && stage test "$TEST_S" ctest -L gpu -E "$TEST_EXCLUDE" -V --timeout "$TEST_S")
  # NCCL at world size 1 (no MPI in this build: a process is a world of one). NCCL_DEBUG=WARN
  # puts NCCL's own reason next to ours when something fails.
  n0=$(wc -l < "$RES")
  want nccl && stage nccl "$NCCL_S" env NCCL_DEBUG=WARN VOLT_TEST_TMP=/tmp/volt-nccl "$BUILD/tests/test_nccl"
  if want nccl; then   # only this stage's lines: "nccl: <section>: ok|FAIL ...", its FAIL/SKIP lines and count
    tail -n +$((n0 + 1)) "$RES" | grep -E "^(nccl: |FAIL|SKIP|[0-9]+ passed)" | cut -c1-240 |
      sed -E 's/^(nccl: )?/RESULT nccl: /' >> "$RES.tmp" || true
  fi
  want test && summarize_tests "$RES" >> "$RES.tmp"
  [ -f "$RES.tmp" ] && cat "$RES.tmp" >> "$RES" && rm -f "$RES.tmp"
elif want test || want nccl || want bench; then
  log "RESULT no build (failed or not made): no tests, no volt bench (the peer still runs)"
fi
want bench && stage bench $((BENCH_BUDGET_S + 20)) env BUILD="$BUILD" BUDGET_S="$BENCH_BUDGET_S" bash bench/gpu/run.sh
# the seed's whole job (stage job, asked for by name); the corpus is made before the clock starts
if [ $ok = 1 ] && want job; then
  stage job "${JOB_S:-240}" env BUILD="$BUILD" TEXTS="${JOB_TEXTS:-50000}" SEQ="${JOB_SEQ:-512}" \
    PRESET="${JOB_PRESET:-distilbert-base}" EPOCHS="${JOB_EPOCHS:-3}" BATCH="${JOB_BATCH:-12}" \
    VOCAB="${JOB_VOCAB:-}" APP_TIMEOUT=$(( ${JOB_S:-240} - 20 )) bash bench/gpu/seed_job.sh
fi
# the batch size finder until the GPU runs out of memory (the text app, bf16-mixed, eager)
tuner() {
  local out rc
  out=$(env ${TUNER_SIM_MEM_MB:+CUDASIM_MEM_MB=$TUNER_SIM_MEM_MB} BUILD="$BUILD" TEXTS="${TUNER_TEXTS:-2000}" SEQ="${TUNER_SEQ:-512}" PRESET="${TUNER_PRESET:-distilbert-base}" \
    EPOCHS=1 BATCH=12 COMPILE=0 THROUGHPUT=0 ASYNC=0 VOCAB="${JOB_VOCAB:-}" APP_TIMEOUT=$(( ${TUNER_S:-150} - 20 )) \
    EXTRA="--tuner.scale_batch_size power --tuner.steps_per_trial 2 --trainer.limit_train_batches 3 --trainer.limit_val_batches 2 --trainer.limit_test_batches 2" \
    bash bench/gpu/seed_job.sh 2>&1)
  rc=$?
  echo "$out" | tail -n 30 | sed 's/^RESULT job: /tuner (seed_job.sh): /'   # not the job stage's lines
  echo "$out" | grep '^scale_batch_size' | sed 's/^/RESULT tuner: /'
  echo "$out" | grep -q '^scale_batch_size (power): .*(out of memory); batch size [0-9]* for fit' ||
    echo "RESULT tuner: FAIL: no trial ran out of memory, or no size was found"
  return "$rc"
}
# per-op profile of the seed step (bf16-mixed, eager): rows of core/profile.c's table
profile() {
  VOLT_PROFILE=1 VAL_STEPS=0 "$BUILD/bench/bench_distilbert" "${VOLT_PRESET:-distilbert-base}" 3 2 hf "${BATCH:-12}" \
    "${SEQ:-512}" bf16-mixed tail cuda 2>&1 |
    awk '/^volt DistilBERT/ { done = 1 } /^RESULT / { sub(/^RESULT /, "profile run: ") }
         !done && /^(\||volt profile)/ { $0 = "RESULT profile: " $0 } { print }'
  local rc="${PIPESTATUS[0]}"
  # PyTorch's attention at the same shape, the reference for the profile's attention rows
  # (bench/gpu/peer_attention.py: SDPA's backends and the unfused composition, ~20 s)
  timeout "${ATTN_PEER_S:-45}" python3 bench/gpu/peer_attention.py --iters 10 ${ATTN_PEER_ARGS:-} 2>&1 | tail -n 40
  return "$rc"
}
# measured NCCL at world size 1 and the projected scaling from the bench's best volt step
scaling() {
  local ms eager
  ms=$(sed -n 's/^RESULT summary volt bf16-mixed+compile job_s=[0-9.]* train_ms_per_step=\([0-9.]*\).*/\1/p' "$RES" | tail -1)
  [ -n "$ms" ] || { ms=6.5; echo "no bf16-mixed+compile step time from the bench stage: projecting from the target, 6.5 ms"; }
  # zero2 / fsdp do not compile (docs/NCCL.md): their one-GPU step is the eager one
  eager=$(sed -n 's/^RESULT summary volt bf16-mixed job_s=[0-9.]* train_ms_per_step=\([0-9.]*\).*/\1/p' "$RES" | tail -1)
  [ -n "$eager" ] || { eager=$ms; echo "no eager bf16-mixed step time from the bench stage: zero2/fsdp projected from $ms ms"; }
  STEP_MS=$ms STEP_MS_EAGER=$eager PRESET="${VOLT_PRESET:-distilbert-base}" "$BUILD/bench/bench_nccl" 20 2>&1 |
    sed -E 's/^RESULT nccl /RESULT scaling: /'
  return "${PIPESTATUS[0]}"
}
# compute-sanitizer over the op and attention tests (stage sanitize, asked for by name)
sanitize() {
  local cs rc=0 tool t out filt
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer \
       /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)
  [ -n "$cs" ] || { echo "RESULT sanitize: compute-sanitizer not found: not run"; return 0; }
  # the kernel filter's option: --kernel-name (newer) or --filter (older)
  if "$cs" --help 2>&1 | grep -q -- '--kernel-name '; then filt=(--kernel-name kns=attn); else filt=(--filter kns=attn); fi
  for tool in memcheck:test_cuda_ops racecheck:test_cuda_attention synccheck:test_cuda_attention; do
    t=${tool#*:} tool=${tool%%:*}
    out=$(VOLT_TEST_QUICK=1 "$cs" --tool "$tool" --error-exitcode 9 --print-limit 20 \
          $([ "$tool" = memcheck ] || echo "${filt[@]}") "$BUILD/tests/$t" 2>&1)
    local r=$?
    echo "$out" | tail -n 60
    echo "RESULT sanitize: $tool $t: $(echo "$out" | grep -o 'ERROR SUMMARY: .*' | tail -1 || true) (rc $r)"
    [ $r = 0 ] || rc=$r
  done
  return $rc
}
if [ $ok = 1 ]; then
  export BUILD RES   # the stage functions run in a child bash
  want sanitize && stage sanitize "${SANITIZE_S:-120}" sanitize
  want tuner && stage tuner "${TUNER_S:-150}" tuner   # a function: defined above, so called here
  want profile && stage profile "${PROFILE_S:-90}" profile
  want scaling && stage scaling "${SCALING_S:-60}" scaling
fi
log "==== summary"
# the STAGE and RESULT lines, then the bench's table (bench/gpu/run.sh's "== summary" block)
{ grep -E "^(STAGE|RESULT)" "$RES"; sed -n '/^== summary/,/^(job s: /p' "$RES"; } > "$RES.sum"
cat "$RES.sum" | tee -a "$RES"; rm -f "$RES.sum"
log "total $(( $(date +%s) - T0 ))s; results in $RES"
