#!/bin/bash
# The seed's shape: a distilbert-base training step at batch 12 x 512 with a padding tail,
# HF dropouts on both sides (dropout 0.1, attention_dropout 0.1, seq_classif_dropout 0.2),
# volt vs PyTorch in one invocation: peak memory next to step time, and the attention part
# of volt's step against its FLOP share.
#
#   bench/run_seed_shape.sh                      # 1 round
#   ROUNDS=2 STEPS=3 WARMUP=1 bench/run_seed_shape.sh
#
# Per round, each a fresh process, alternating sides:
#   1. a 1-step run of volt, then of PyTorch (no warm-up) under /usr/bin/time -v: the peak
#      RSS ("Maximum resident set size") of each side;
#   2. a timed run of volt, then of PyTorch: median of STEPS steps after WARMUP (wall and
#      process CPU time per step; peak RSS of that run too).
# Then once: bench_attention seed (volt_attention_dropout fwd + bwd at B=12 H=12 T=512
# D=64 with the same padding tail, p 0.1 and 0, and the unfused softmax + dropout
# composition, with arena peaks), and bench_attention profile (PROFILE_STEPS volt steps,
# each followed in the same process by one attention fwd + bwd at the step's shape:
# attention time x 6 layers / step time against the attention FLOPs / the step's FLOPs;
# GEMMs: linears fwd + bwd, 6 GEMMs of attention on the visible keys).
# Padding (PAD=tail, read by bench_distilbert and peer_distilbert.py): row b keeps its
# first T - b T / (2 B) tokens (512 ... 278), then pad id 0 with attention mask 0.
# Threads, BLAS and Python: as bench/run_distilbert.sh (OMP_NUM_THREADS default 2,
# OMP_WAIT_POLICY passive, the OpenMP build of OpenBLAS for both, Debian's python3-torch).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
ROUNDS=${ROUNDS:-1}
STEPS=${STEPS:-2}
WARMUP=${WARMUP:-1}
PROFILE_STEPS=${PROFILE_STEPS:-2}
ATTENTION=${ATTENTION:-1}        # 0: skip the bench_attention parts (step and memory only)
B=12
T=512
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export PAD=tail
PY=/usr/bin/python3
OBLAS_OMP=/usr/lib/x86_64-linux-gnu/openblas-openmp
TIME=/usr/bin/time

if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "run_seed_shape.sh: $PY cannot import torch (apt-get install -y python3-torch)" >&2
    exit 1
fi
if [ ! -x "$TIME" ]; then
    echo "run_seed_shape.sh: $TIME missing (apt-get install -y time)" >&2
    exit 1
fi
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j2 --target bench_distilbert bench_attention >/dev/null
BENCH="$BUILD/bench/bench_distilbert"

# run SIDE STEPS WARMUP: prints "ms cpu_ms rss_kb"; the program's output goes to stderr
run() {
    local side=$1 steps=$2 warmup=$3 log out
    log=$(mktemp)
    if [ "$side" = volt ]; then
        out=$("$TIME" -v -o "$log" "$BENCH" distilbert-base "$steps" "$warmup" hf "$B" "$T")
    else
        out=$(LD_LIBRARY_PATH="$OBLAS_OMP${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            "$TIME" -v -o "$log" "$PY" "$ROOT/bench/peer_distilbert.py" distilbert-base "$steps" "$warmup" hf "$B" "$T")
    fi
    echo "$out" >&2
    # the GEMM library each side says it used (volt: "GEMM ..." at the end of its first line;
    # the peer: the BLAS it mapped)
    if [ "$side" = volt ]; then
        sed -n '1s/.*; GEMM \(.*\)$/\1/p' <<<"$out" >"$LIBS.volt"
    else
        sed -n '1s/.*; GEMM \(.*\)$/\1/p' <<<"$out" | { grep -o 'libopenblas[^ ,]*\|libmkl[^ ,]*' || grep -o 'libblas[^ ,]*'; } | head -1 >"$LIBS.torch"
    fi
    local rss
    rss=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): \([0-9]*\)$/\1/p' "$log")
    echo "$side: peak RSS $rss kB" >&2
    rm -f "$log"
    echo "$(sed -n 's/^RESULT [a-z]* [a-z-]* ms_per_step=\([0-9.]*\) cpu_ms_per_step=\([0-9.]*\).*$/\1 \2/p' <<<"$out") $rss"
}

RES=$(mktemp)
LIBS=$(mktemp)
trap 'rm -f "$RES" "$LIBS" "$LIBS.volt" "$LIBS.torch"' EXIT
for r in $(seq 1 "$ROUNDS"); do
    read -r _ _ v1 <<<"$(run volt 1 0)"
    read -r _ _ t1 <<<"$(run torch 1 0)"
    read -r v vc vr <<<"$(run volt "$STEPS" "$WARMUP")"
    read -r t tc tr <<<"$(run torch "$STEPS" "$WARMUP")"
    echo "round $r: 1-step peak RSS volt $v1 kB, torch $t1 kB; step volt $v ms (CPU $vc), torch $t ms (CPU $tc)" >&2
    echo "$v1 $t1 $v $t $vc $tc $vr $tr" >>"$RES"
done
att= prof=
if [ "$ATTENTION" != 0 ]; then
    att=$("$BUILD/bench/bench_attention" seed 3)
    prof=$("$BUILD/bench/bench_attention" profile "$PROFILE_STEPS")
    echo "$prof" >&2
fi

echo
echo "DistilBERT (distilbert-base) training step, batch $B x $T with a padding tail, HF dropouts on both sides, fp32," \
     "OMP_NUM_THREADS=$OMP_NUM_THREADS; $ROUNDS round(s), median of $STEPS steps after $WARMUP"
echo "GEMM library: volt $(cat "$LIBS.volt" 2>/dev/null) (VOLT_GEMM=${VOLT_GEMM:-auto}); PyTorch $(cat "$LIBS.torch" 2>/dev/null)"
printf '| %5s | %14s | %14s | %9s | %14s | %14s | %9s | %12s | %12s | %10s | %9s |\n' round "volt RSS 1-st" "torch RSS 1-st" \
    "ratio" "volt RSS timed" "torch RSS tmd" "ratio" "volt ms/step" "torch ms" "time ratio" "CPU ratio"
echo '|-------|----------------|----------------|-----------|----------------|----------------|-----------|--------------|--------------|------------|-----------|'
awk '{ printf "| %5d | %11.2f GB | %11.2f GB | %9.3f | %11.2f GB | %11.2f GB | %9.3f | %12.1f | %12.1f | %10.3f | %9.3f |\n", NR,
       $1 / 1048576, $2 / 1048576, $1 / $2, $7 / 1048576, $8 / 1048576, $7 / $8, $3, $4, $3 / $4, $5 / $6 }' "$RES"
echo
echo "$att"
echo
echo "$prof" | grep -v '^step '
