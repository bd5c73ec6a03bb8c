#!/usr/bin/env bash
# Bitwise golden runs (registered by tests/golden.cmake): short training runs whose exported
# f32 weights must be byte-identical to checksums taken before a refactor (the device-ready
# core was checked this way against the commit before it). The checksums cover the tensor
# data, not the header.
#
#   golden.sh check  FASHION_APP TEXT_APP VOLT_RUN WORKDIR SUMS   compare with SUMS
#   golden.sh record FASHION_APP TEXT_APP VOLT_RUN WORKDIR SUMS   (re)write SUMS
#
# The runs: the Fashion-MNIST MLP for 20 steps (dropout 0.2) in 32-true, bf16-mixed and
# bf16-true; the same MLP under fsdp on 2 ranks (MPI); DistilBERT "small" with its dropouts
# (attention dropout included) in 32-true and 16-mixed on a generated corpus.
# Bits depend on the instruction set the SIMD clones and oneDNN pick and on the thread count,
# so SUMS holds the machine kind it was taken on (x86-64 with AVX512-BF16, 2 OpenMP threads);
# on another kind the test is skipped (exit 77) saying so. Prints "golden: ok" when all match.
set -uo pipefail
MODE=${1:?mode}; FASHION=${2:?fashion app}; TEXT=${3:?text app}; VOLT_RUN=${4:?volt-run}
W=${5:?workdir}; SUMS=${6:?sums file}
export OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive
die() { echo "golden: FAILED: $*"; exit 1; }
rm -rf "$W" && mkdir -p "$W" || exit 1

KIND="x86_64-avx512_bf16-omp2"
if ! grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null || [[ $(uname -m) != x86_64 ]]; then
    echo "golden: skipped: checksums were taken on $KIND; this machine is another kind"; exit 77
fi
DATA=/usr/share/datasets/fashion-mnist
[[ -e $DATA/train-images-idx3-ubyte.gz || -e $DATA/train-images-idx3-ubyte ]] || {
    [[ -n ${CI:-} ]] && die "Fashion-MNIST missing at $DATA (scripts/setup.sh installs it)"
    echo "golden: skipped: Fashion-MNIST missing at $DATA"; exit 77; }

FCOMMON=(--model mlp --epochs 1 --limit-train-batches 20 --limit-val-batches 2 --limit-test-batches 2
         --no-progress --workers 0 --batch-size 32)
printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]' the a movie film plot acting was is \
    good great fine nice fun bad awful poor dull terrible and but very really '##s' '.' ',' >"$W/vocab.txt"
POS=(good great fine nice fun); NEG=(bad awful poor dull terrible); NOUN=(movie film plot acting)
{ echo 'text,label'
  for i in $(seq 0 79); do n=${NOUN[$((i % 4))]}
    if ((i % 2)); then echo "\"the $n was very ${POS[$((i % 5))]}, really ${POS[$(((i / 2) % 5))]}.\",1"
    else echo "\"the $n was very ${NEG[$((i % 5))]}, really ${NEG[$(((i / 2) % 5))]}.\",0"; fi
  done; } >"$W/tiny.csv"
TCOMMON=(--data "csv:$W/tiny.csv" --vocab "$W/vocab.txt" --model-preset small --max-length 24 --batch-size 4
         --lr 1e-4 --cache-dir "$W/cache" --no-progress --workers 0 --epochs 1 --limit-train-batches 10
         --limit-val-batches 2 --limit-test-batches 2)

run() {   # NAME CMD...: the command must exit 0; its export is $W/NAME.safetensors
    local name=$1; shift
    "$@" --root "$W/$name" --export-full "$W/$name.safetensors" >"$W/$name.log" 2>&1 ||
        { tail -20 "$W/$name.log"; die "$name: exit status $?"; }
}
run mlp_32 "$FASHION" "${FCOMMON[@]}" --precision 32-true
run mlp_bf16mixed "$FASHION" "${FCOMMON[@]}" --precision bf16-mixed
run mlp_bf16true "$FASHION" "${FCOMMON[@]}" --precision bf16-true
run bert_32 "$TEXT" "${TCOMMON[@]}" --precision 32-true
run bert_16mixed "$TEXT" "${TCOMMON[@]}" --precision 16-mixed
if [[ -n $VOLT_RUN ]]; then
    OMP_NUM_THREADS=1 run mlp_fsdp_np2 "$VOLT_RUN" -n 2 "$FASHION" "${FCOMMON[@]}" --batch-size 16 --strategy fsdp
fi

# the tensor bytes only (after the 8-byte length and the JSON header): the header's metadata
# ("format" became "pt" for exports, 2026-12-06) is not the weights
for f in "$W"/*.safetensors; do
    hlen=$(od -An -t u8 -N8 "$f" | tr -d ' ')
    echo "$(tail -c +$((9 + hlen)) "$f" | sha256sum | cut -d' ' -f1) $(basename "$f")"
done >"$W/sums.txt"
if [[ $MODE == record ]]; then
    { echo "# kind $KIND"; cat "$W/sums.txt"; } >"$SUMS"; cat "$SUMS"; echo "golden: recorded"; exit 0
fi
grep -q "^# kind $KIND\$" "$SUMS" || die "$SUMS was not taken on $KIND"
bad=0
while read -r sum name; do
    want=$(awk -v n="$name" '$2 == n { print $1 }' "$SUMS")
    [[ -n $want ]] || { echo "golden: $name: no checksum recorded"; bad=1; continue; }
    [[ $sum == "$want" ]] || { echo "golden: $name: weights differ from the recorded bits ($sum, want $want)"; bad=1; }
done <"$W/sums.txt"
n=$(grep -vc '^#' "$SUMS"); m=$(wc -l <"$W/sums.txt")
[[ $n == "$m" ]] || { echo "golden: $m runs, $n checksums recorded"; bad=1; }
((bad)) && die "see above"
echo "golden: ok ($m runs bit-identical)"
