#!/bin/bash
# DistilBERT training step, volt vs PyTorch, measured alternately in one invocation.
#
#   bench/run_distilbert.sh                 # HF dropouts, 3 rounds, distilbert-base and small
#   ROUNDS=5 DROP=off PRESETS=small bench/run_distilbert.sh
#
# Builds bench_distilbert (Release) into $BUILD (default build/), then for each preset runs
# ROUNDS rounds of [volt, PyTorch] (each a fresh process: median of STEPS steps after
# WARMUP); prints one table: the median over rounds of each side's ms/step and tokens/s,
# and the median of the per-round ratios volt/PyTorch of the wall time per step and of the
# process CPU time per step (all threads; < 1 = volt faster). On a shared, loaded machine
# the CPU-time ratio is the steadier one.
# Both sides: batch 8 x 128 tokens, no padding, fp32, AdamW (lr 5e-5, wd 0.01).
#   DROP=hf   HF's defaults: dropout 0.1, attention_dropout 0.1, seq_classif_dropout 0.2
#             on both sides (volt then runs the attention unfused, as PyTorch does)
#   DROP=off  all dropouts 0 on both sides (volt uses its fused attention kernel)
# Threads: OMP_NUM_THREADS (default 2) for both; PyTorch gets torch.set_num_threads of it.
# OMP_WAIT_POLICY defaults to passive for both (libgomp's spinning threads distort timings
# on a shared machine); set OMP_WAIT_POLICY=active on an idle one.
# BLAS: the OpenMP build of OpenBLAS for both: volt links it through cmake/deps.cmake (a
# RUNPATH to openblas-openmp/), and PyTorch's libblas.so.3 is pointed at the same library
# with LD_LIBRARY_PATH (Debian's alternatives may select the pthreads build); the peer
# prints which libopenblas it has mapped.
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

steps_for() { case "$1" in distilbert-base) echo "${STEPS:-5} ${WARMUP:-2}" ;; *) echo "${STEPS:-20} ${WARMUP:-3}" ;; esac; }
result() { sed -n 's/^RESULT [a-z]* [a-z-]* ms_per_step=\([0-9.]*\) cpu_ms_per_step=\([0-9.]*\)$/\1 \2/p'; }

RES=$(mktemp)
trap 'rm -f "$RES"' EXIT
for preset in $PRESETS; do
    read -r steps warmup <<<"$(steps_for "$preset")"
    for r in $(seq 1 "$ROUNDS"); do
        out=$("$BENCH" "$preset" "$steps" "$warmup" "$DROP")
        echo "$out" >&2
        read -r v vc <<<"$(result <<<"$out")"
        out=$(LD_LIBRARY_PATH="$OBLAS_OMP${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            "$PY" "$ROOT/bench/peer_distilbert.py" "$preset" "$steps" "$warmup" "$DROP")
        echo "$out" >&2
        read -r t tc <<<"$(result <<<"$out")"
        echo "round $r $preset: volt $v ms (CPU $vc), torch $t ms (CPU $tc), ratio" \
             "$(awk -v a="$v" -v b="$t" 'BEGIN{printf "%.3f", a/b}') (CPU $(awk -v a="$vc" -v b="$tc" 'BEGIN{printf "%.3f", a/b}'))" >&2
        echo "$preset $v $t $vc $tc" >>"$RES"
    done
done

echo
echo "DistilBERT training step (fwd + bwd + AdamW), batch 8 x 128, dropout $DROP, OMP_NUM_THREADS=$OMP_NUM_THREADS," \
     "OMP_WAIT_POLICY=$OMP_WAIT_POLICY, OpenBLAS (OpenMP) for both; median over $ROUNDS alternating rounds"
printf '| %-15s | %13s | %13s | %10s | %11s | %10s | %14s |\n' preset "volt ms/step" "torch ms/step" "volt tok/s" \
    "torch tok/s" "volt/torch" "volt/torch CPU"
echo '|-----------------|---------------|---------------|------------|-------------|------------|----------------|'
for preset in $PRESETS; do
    awk -v p="$preset" '
        function median(a, n,   i, j, x) {
            for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        $1 == p { n++; v[n] = $2; t[n] = $3; q[n] = $2 / $3; qc[n] = $4 / $5 }
        END {
            mv = median(v, n); mt = median(t, n)
            printf "| %-15s | %13.1f | %13.1f | %10.0f | %11.0f | %10.3f | %14.3f |\n", p, mv, mt, 1024e3 / mv, 1024e3 / mt,
                   median(q, n), median(qc, n)
        }' "$RES"
done
