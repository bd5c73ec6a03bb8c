#!/bin/bash
# The GPU bench of issue 11, one invocation, one GPU: volt's DistilBERT training step on
# --accelerator cuda (bench/bench_distilbert.c) and the PyTorch Lightning + transformers
# peer (bench/gpu/peer_lightning.py), both at batch 12 x 512 with the same padding tail.
#
#   bench/gpu/run.sh                      # after a CUDA build in build-gpu/
#   BUILD=build STEPS=10 BUDGET_S=120 bench/gpu/run.sh
#
#   BUILD       the build folder holding bench/bench_distilbert (default build-gpu)
#   VOLT_PRESET, BATCH, SEQ  bench_distilbert's preset and shape (default distilbert-base, 12, 512;
#               the peer gets --batch/--seq too); PEER_ARGS: more peer arguments. A smaller
#               shape is for the simulator dry run (scripts/device-check.sh --sim): MFU and the
#               job time still assume the seed's step, so they mean nothing there.
#   STEPS       timed steps per configuration (default 20; warm-ups: WARMUP, default 5)
#   VOLT_PRECISIONS  default "32-true 16-mixed bf16-mixed bf16-mixed+compile" (bench_distilbert's precisions;
#               +compile: COMPILE=1, the timed steps replay a CUDA graph)
#   PRECISIONS  the peer's, default "32-true,16-mixed,bf16-mixed,bf16-mixed+compile"
#   BUDGET_S    seconds for the whole bench (default 180; scripts/device-check.sh gives 150); each side gets its share under
#               `timeout`, so a hang or a slow torch.compile costs its share, not the run
#   PYTHON      the python3 that has torch, lightning and transformers (default python3)
# Prints each side's table, then one summary: ms/step, samples/s, MFU (1.76 TFLOP per step
# against 790 TFLOP/s bf16), peak device memory, projected 3-epoch seed job, and volt's
# samples/s over the best peer configuration's. volt's memory column is the cuda backend's
# device memory high-water over the training steps (core/cuda/memstat.c: pool + VMM unit
# buffers + cuBLASLt workspace), as the peer's is torch.cuda.max_memory_allocated; on a
# device without that figure, "~" and an estimate: the step arena's peak plus 16 bytes per
# parameter (f32 weights, grads and Adam's two moments).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
VOLT_PRESET=${VOLT_PRESET:-distilbert-base}
BATCH=${BATCH:-12}
SEQ=${SEQ:-512}
PEER_ARGS=${PEER_ARGS:-}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-5}
BUDGET_S=${BUDGET_S:-180}
PYTHON=${PYTHON:-python3}
VOLT_PRECISIONS=${VOLT_PRECISIONS:-"32-true 16-mixed bf16-mixed bf16-mixed+compile"}
PRECISIONS=${PRECISIONS:-"32-true,16-mixed,bf16-mixed,bf16-mixed+compile"}
FLOP=1.76e12
PEAK=790
TRAIN_STEPS=2916
VAL_SAMPLES=${VAL_SAMPLES:-15008}
export VAL_SAMPLES

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
nvolt=$(wc -w <<<"$VOLT_PRECISIONS")
status=0   # non-zero when a volt configuration failed (the peer's absence is not a failure of volt)
# a quarter to volt (a row is ~5 s on a GPU: start, context, 25 steps), the rest to the peer,
# whose torch.compile row comes last
volt_share=$(( BUDGET_S / 4 / (nvolt > 0 ? nvolt : 1) ))
peer_share=$(( BUDGET_S - volt_share * nvolt ))

echo "== volt (bench_distilbert, accelerator cuda), $(date -u +%FT%TZ)"
for p in $VOLT_PRECISIONS; do
  if [ ! -x "$BUILD/bench/bench_distilbert" ]; then
    echo "RESULT volt-missing $p: $BUILD/bench/bench_distilbert not built"
    status=1
    break
  fi
  # "<precision>+compile": the timed steps replay a CUDA graph (bench_distilbert's COMPILE=1)
  COMPILE=$([ "${p%+compile}" != "$p" ] && echo 1 || echo 0) timeout -k 5 "$volt_share" \
    "$BUILD/bench/bench_distilbert" "$VOLT_PRESET" "$STEPS" "$WARMUP" hf "$BATCH" "$SEQ" "${p%+compile}" tail cuda \
    2>&1 | tee "$TMP/volt-$p.txt" | sed -E "s/^RESULT (volt(-compile)?) /RESULT \1 [$p] /"   # the precision, for the reader
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || { echo "RESULT volt-failed $p rc=$rc$([ "$rc" = 124 ] && echo " (timed out after ${volt_share}s)")"; status=1; }
done

echo "== peer (PyTorch Lightning + transformers), $(date -u +%FT%TZ)"
# the peer's modules first: a machine without them gets one clear line, volt is still measured
missing=$("$PYTHON" -c 'import importlib.util as u
print(" ".join(m for m in ("torch", "lightning", "transformers") if u.find_spec(m) is None))' 2>/dev/null) ||
  missing="$PYTHON"
if [ -n "$missing" ]; then
  echo "RESULT peer: skipped (${missing// /, } missing)"
else
  # the training precisions in --precisions; a comma list with no spaces
  PYTHONUNBUFFERED=1 timeout -k 5 "$peer_share" "$PYTHON" "$ROOT/bench/gpu/peer_lightning.py" --steps "$STEPS" \
    --warmup "$WARMUP" --batch "$BATCH" --seq "$SEQ" --precisions "$PRECISIONS" $PEER_ARGS 2>&1 |
    grep -v "^\s*$" | tee "$TMP/peer.txt"
  rc=${PIPESTATUS[0]}
  # 3: the peer said why it skipped, in a RESULT line of its own
  [ "$rc" = 0 ] || [ "$rc" = 3 ] || echo "RESULT peer-failed rc=$rc$([ "$rc" = 124 ] && echo " (timed out after ${peer_share}s: the configurations above it finished)")"
fi

echo "== summary ($VOLT_PRESET, batch $BATCH x $SEQ, padding tail; MFU at $FLOP FLOP/step vs $PEAK TFLOP/s; job = 3 x ($TRAIN_STEPS steps + validation))"
printf '| %-28s | %9s | %9s | %6s | %9s | %10s |\n' side/precision ms/step samples/s MFU% "peak MiB" "job s"
printf '|%s|%s|%s|%s|%s|%s|\n' ------------------------------ ----------- ----------- -------- ----------- ------------
best_peer=0
ratios=()
declare -A peer_sps=()
for f in "$TMP"/peer.txt; do
  [ -f "$f" ] || continue
  while read -r _ _ prec rest; do
    declare -A kv=()
    for x in $rest; do kv[${x%%=*}]=${x#*=}; done
    printf '| %-28s | %9s | %9s | %6s | %9s | %10s |\n' "peer $prec" "${kv[ms_per_step]}" "${kv[samples_per_s]}" \
      "${kv[mfu_pct]}" "${kv[peak_mib]}" "${kv[job_s]}"
    peer_sps[$prec]=${kv[samples_per_s]}
    best_peer=$(awk -v a="$best_peer" -v b="${kv[samples_per_s]}" 'BEGIN { print (b > a ? b : a) }')
    unset kv
  done < <(grep '^RESULT peer ' "$f")
done
for p in $VOLT_PRECISIONS; do
  f="$TMP/volt-$p.txt"
  line=$(grep -E '^RESULT volt(-compile)? ' "$f" 2>/dev/null) || continue
  ms=$(sed -n 's/.* ms_per_step=\([0-9.]*\).*/\1/p' <<<"$line")
  sps=$(sed -n 's/.*samples_per_s=\([0-9.]*\).*/\1/p' <<<"$line")
  arena=$(sed -n 's/.*arena_peak_mib=\([0-9.]*\).*/\1/p' <<<"$line")
  np=$(sed -n 's/.*params=\([0-9]*\).*/\1/p' <<<"$line")
  vms=$(sed -n 's/.*val_ms_per_batch=\([0-9.]*\).*/\1/p' <<<"$line")
  dpk=$(sed -n 's/.*device_peak_mib=\([0-9.]*\).*/\1/p' <<<"$line")   # absent or -1: not measured
  # the job as the peer counts it: 3 x (training steps + validation batches of VAL_SAMPLES)
  read -r mfu mem job ratio < <(awk -v ms="$ms" -v a="$arena" -v n="$np" -v f="$FLOP" -v pk="$PEAK" -v ts="$TRAIN_STEPS" \
    -v bp="$best_peer" -v b="$BATCH" -v vms="${vms:-0}" -v vs="$VAL_SAMPLES" 'BEGIN {
      printf "%.1f %.0f %.1f %s\n", f / (ms / 1e3) / (pk * 1e12) * 100, a + n * 16 / 1048576,
      3 * (ts * ms + int((vs + b - 1) / b) * vms) / 1e3, (bp > 0 ? sprintf("%.2f", b / (ms / 1e3) / bp) : "n/a") }')
  [ -n "$dpk" ] && mem=$(printf '%.0f' "$dpk") || mem="~$mem"
  printf '| %-28s | %9s | %9s | %6s | %9s | %10s |\n' "volt $p" "$ms" "$sps" "$mfu" "$mem" "$job"
  echo "RESULT summary volt $p job_s=$job train_ms_per_step=$ms val_ms_per_batch=${vms:-n/a}" >> "$TMP/jobs"
  same=$(awk -v ms="$ms" -v ps="${peer_sps[$p]:-0}" -v b="$BATCH" 'BEGIN { print (ps > 0 ? sprintf("%.2f", b / (ms / 1e3) / ps) : "n/a") }')
  ratios+=("RESULT summary volt $p samples_per_s_over_best_peer=$ratio over_peer_same_precision=$same")
done
echo "(job s: 3 x ($TRAIN_STEPS training steps + $VAL_SAMPLES validation samples at batch $BATCH); volt validates eager, also in its +compile row)"
[ -f "$TMP/jobs" ] && cat "$TMP/jobs"
# after the table, so the table stays one block (scripts/device-check.sh repeats it in its summary)
for r in "${ratios[@]}"; do echo "$r"; done
exit $status
