#!/bin/bash
# DistilBERT training step, volt vs PyTorch, measured alternately in one invocation.
#
#   bench/run_distilbert.sh                 # HF dropouts, 3 rounds, distilbert-base and small
#   ROUNDS=5 DROP=off PRESETS=small bench/run_distilbert.sh
#   PRECISIONS=bf16-mixed SHAPES=12x512:tail PRESETS=distilbert-base bench/run_distilbert.sh
#
# Builds bench_distilbert (Release) into $BUILD (default build/), then for each preset runs
# ROUNDS rounds of [volt, PyTorch] (each a fresh process: median of STEPS steps after
# WARMUP); prints one table: the median over rounds of each side's ms/step and tokens/s,
# and the median of the per-round ratios volt/PyTorch of the wall time per step and of the
# process CPU time per step (all threads; < 1 = volt faster). On a shared, loaded machine
# the CPU-time ratio is the steadier one.
# Both sides: AdamW (lr 5e-5, wd 0.01), for each of
#   SHAPES      BxT[:tail], default "8x128 12x512:tail": batch B x T tokens; :tail = a
#               realistic padding tail (row b keeps T/2 + (7919 b mod T/2) + 1 tokens, the
#               rest [PAD] with mask 0), no padding otherwise; 12x512:tail is the shape of
#               the seed's IMDB run (batch 12, max length 512)
#   PRECISIONS  default "32-true bf16-mixed": volt's step compute dtype bf16 (native
#               AVX512-BF16 GEMMs through oneDNN where the CPU has them, docs/PRECISION.md);
#               PyTorch under torch.autocast("cpu", torch.bfloat16)
# and the table's last column is volt's own 32-true / bf16-mixed step time (CPU time,
# medians over rounds): how much faster bf16-mixed is.
#   DROP=hf   HF's defaults: dropout 0.1, attention_dropout 0.1, seq_classif_dropout 0.2
#             on both sides (volt then runs the attention unfused, as PyTorch does)
#   DROP=off  all dropouts 0 on both sides (volt uses its fused attention kernel)
# Threads: OMP_NUM_THREADS (default 2) for both; PyTorch gets torch.set_num_threads of it.
# OMP_WAIT_POLICY defaults to passive for both (libgomp's spinning threads distort timings
# on a shared machine); set OMP_WAIT_POLICY=active on an idle one.
# BLAS: the OpenMP build of OpenBLAS for both: volt links it through cmake/deps.cmake (a
# RUNPATH to openblas-openmp/), and PyTorch's libblas.so.3 is pointed at the same library
# with LD_LIBRARY_PATH (Debian's alternatives may select the pthreads build). volt's f32
# and bf16 GEMMs run through oneDNN (core/cpu/gemm.c; VOLT_GEMM=openblas forces OpenBLAS
# for f32), PyTorch's f32 GEMMs through that OpenBLAS and its autocast bf16 ones through
# oneDNN (the same Debian libdnnl). Each side prints its GEMM library; so does the table.
# PyTorch: Debian's /usr/bin/python3 with python3-torch (apt-get install -y python3-torch);
# not a pyenv python3 that may be first on PATH.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
ROUNDS=${ROUNDS:-3}
DROP=${DROP:-hf}
PRESETS=${PRESETS:-"distilbert-base small"}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
PY=/usr/bin/python3
OBLAS_OMP=/usr/lib/x86_64-linux-gnu/openblas-openmp

if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "run_distilbert.sh: $PY cannot import torch (apt-get install -y python3-torch)" >&2
    exit 1
fi
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j2 --target bench_distilbert >/dev/null
BENCH="$BUILD/bench/bench_distilbert"

steps_for() {   # preset, tokens per batch
    case "$1" in distilbert-base) if [ "$2" -gt 2048 ]; then echo "${STEPS:-3} ${WARMUP:-1}"; else echo "${STEPS:-5} ${WARMUP:-2}"; fi ;;
                 *) echo "${STEPS:-20} ${WARMUP:-3}" ;; esac
}
result() { sed -n 's/^RESULT [a-z]* [a-z-]* ms_per_step=\([0-9.]*\) cpu_ms_per_step=\([0-9.]*\).*$/\1 \2/p'; }
SHAPES=${SHAPES:-"8x128 12x512:tail"}
PRECISIONS=${PRECISIONS:-"32-true bf16-mixed"}

RES=$(mktemp)
LIBS=$(mktemp)
trap 'rm -f "$RES" "$LIBS"' EXIT
for preset in $PRESETS; do
  for shape in $SHAPES; do
    bt=${shape%%:*}; B=${bt%x*}; T=${bt#*x}
    pad=none; [ "$shape" = "$bt" ] || pad=${shape#*:}
    read -r steps warmup <<<"$(steps_for "$preset" $((B * T)))"
    for prec in $PRECISIONS; do
      for r in $(seq 1 "$ROUNDS"); do
        out=$("$BENCH" "$preset" "$steps" "$warmup" "$DROP" "$B" "$T" "$prec" "$pad")
        echo "$out" >&2
        [ "$r" -gt 1 ] || sed -n "s/^volt .*; GEMM \(.*\)$/volt $prec: \1/p" <<<"$out" >>"$LIBS"
        read -r v vc <<<"$(result <<<"$out")"
        out=$(LD_LIBRARY_PATH="$OBLAS_OMP${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            "$PY" "$ROOT/bench/peer_distilbert.py" "$preset" "$steps" "$warmup" "$DROP" "$B" "$T" "$prec" "$pad")
        echo "$out" >&2
        [ "$r" -gt 1 ] || sed -n "s/^PyTorch .*; GEMM \(.*\)$/torch $prec: \1/p" <<<"$out" >>"$LIBS"
        read -r t tc <<<"$(result <<<"$out")"
        echo "round $r $preset $shape $prec: volt $v ms (CPU $vc), torch $t ms (CPU $tc), ratio" \
             "$(awk -v a="$v" -v b="$t" 'BEGIN{printf "%.3f", a/b}') (CPU $(awk -v a="$vc" -v b="$tc" 'BEGIN{printf "%.3f", a/b}'))" >&2
        echo "$preset $shape $prec $v $t $vc $tc $((B * T))" >>"$RES"
      done
    done
  done
done

echo
echo "DistilBERT training step (fwd + bwd + AdamW), dropout $DROP, OMP_NUM_THREADS=$OMP_NUM_THREADS," \
     "OMP_WAIT_POLICY=$OMP_WAIT_POLICY; median over $ROUNDS alternating rounds"
sort -u "$LIBS" | sed 's/^/GEMM /'
printf '| %-15s | %-11s | %-10s | %12s | %13s | %10s | %11s | %10s | %14s | %16s |\n' preset shape precision \
    "volt ms/step" "torch ms/step" "volt tok/s" "torch tok/s" "volt/torch" "volt/torch CPU" "volt 32/this CPU"
echo '|-----------------|-------------|------------|--------------|---------------|------------|-------------|------------|----------------|------------------|'
for preset in $PRESETS; do
  for shape in $SHAPES; do
    for prec in $PRECISIONS; do
      awk -v p="$preset" -v sh="$shape" -v pr="$prec" '
        function median(a, n,   i, j, x) {
            for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        $1 == p && $2 == sh && $3 == "32-true" { n32++; c32[n32] = $6 }
        $1 == p && $2 == sh && $3 == pr { n++; v[n] = $4; t[n] = $5; q[n] = $4 / $5; qc[n] = $6 / $7; vc[n] = $6; tok = $8 }
        END {
            mv = median(v, n); mt = median(t, n)
            sp = n32 ? sprintf("%.3f", median(c32, n32) / median(vc, n)) : "-"
            printf "| %-15s | %-11s | %-10s | %12.1f | %13.1f | %10.0f | %11.0f | %10.3f | %14.3f | %16s |\n", p, sh, pr,
                   mv, mt, tok * 1e3 / mv, tok * 1e3 / mt, median(q, n), median(qc, n), sp
        }' "$RES"
    done
  done
done
