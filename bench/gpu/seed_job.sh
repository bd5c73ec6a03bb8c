#!/bin/bash
# The seed's whole job, timed as a user runs it (issue 11's mission: under a minute on one H200):
# volt-text-classification fit with seed.json — 35,000 / 5,000 / 10,000 texts, batch 12 x 512,
# Adam lr 5e-5, 3 epochs, the best checkpoint by val_acc kept (and last), then test with the
# best — on the cuda backend at bf16-mixed with compile, from process start to exit: corpus
# reading, tokenization, parameter init, every training step, every validation pass, the
# checkpoints, the reload of the best and the test pass.
#
#   bench/gpu/seed_job.sh                  # after a CUDA build in build-gpu/ (scripts/device-check.sh: stage job)
#   BUILD=build ACCELERATOR=cpu PRESET=tiny TEXTS=400 SEQ=32 EPOCHS=1 bench/gpu/seed_job.sh   # a small run anywhere
#
#   BUILD       the build folder holding apps/volt-text-classification (default build-gpu)
#   DATA        where the corpus goes (default /tmp/volt-seed-job): made by bench/gpu/make_imdb.py
#               (the real IMDB cannot be downloaded here: made-up texts of IMDB's lengths) once,
#               kept for a second run; IMDB=DIR uses a real aclImdb/ instead
#   TEXTS       texts in the made-up corpus (default 50000, the seed's 35000/5000/10000 split)
#   VOCAB       the WordPiece vocab (default ~/.cache/volt/bert-base-uncased/vocab.txt, else
#               .deps/vocab.txt, which scripts/device-check.sh --fetch-deps carries, else a made-up
#               one: make_imdb.py --write-vocab, and the texts use its words)
#   PRESET, SEQ, BATCH, EPOCHS, PRECISION, ACCELERATOR  the run's shape (default distilbert-base, 512,
#               12, 3, bf16-mixed, cuda); COMPILE=0 runs eagerly; ASYNC=0 saves checkpoints on the
#               training thread (default: --checkpoint.async_save, written in the background);
#               SPLIT overrides the split
#   THROUGHPUT  1 (default): the app's ThroughputMonitor (--throughput, window 50) logs the
#               training rates and MFU over the device's own peak (its name from the driver);
#               a RESULT line gives their medians; 0: off
#   PYTHON      a python3 for the generator (numpy makes it ~3x faster; default python3)
#   EXTRA       more arguments for the app
#   APP_TIMEOUT seconds the app may run (default: no limit; the device check's job stage gives
#               JOB_S - 20): past it the app is stopped and the RESULT line says how far it got
#               (the last row of its metrics.csv: epoch and step), so a slow first run still
#               tells the step time
# Prints the app's own output (with the profiler's tables: --trainer.profiler simple), then
# "RESULT job: ..." lines: the tables' main rows, wall seconds of the whole process
# (twice: the first run tokenizes, the second — RUNS=2 — reads the token cache, as a user's
# second job does), the app's fit time, the tokenizer's time and the test accuracy. Exits with
# the app's status.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
APP=$BUILD/apps/volt-text-classification
DATA=${DATA:-/tmp/volt-seed-job}
TEXTS=${TEXTS:-50000}
PRESET=${PRESET:-distilbert-base} SEQ=${SEQ:-512} BATCH=${BATCH:-12} EPOCHS=${EPOCHS:-3}
PRECISION=${PRECISION:-bf16-mixed} ACCELERATOR=${ACCELERATOR:-cuda} COMPILE=${COMPILE:-1}
RUNS=${RUNS:-1} ASYNC=${ASYNC:-1} THROUGHPUT=${THROUGHPUT:-1}
PYTHON=${PYTHON:-python3}
VOCAB=${VOCAB:-}
if [ -z "$VOCAB" ]; then
  for v in "$HOME/.cache/volt/bert-base-uncased/vocab.txt" "$ROOT/.deps/vocab.txt"; do
    [ -s "$v" ] && { VOCAB=$v; break; }
  done
fi
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }'; }   # no bc on every machine
[ -x "$APP" ] || { echo "RESULT job: no $APP (build the volt-text-classification target)"; exit 1; }
if [ -z "$VOCAB" ]; then   # no bert-base-uncased vocab here: a made-up one (the texts then use its words)
  mkdir -p "$DATA" && VOCAB=$DATA/made-up-vocab.txt &&
    "$PYTHON" "$ROOT/bench/gpu/make_imdb.py" "$DATA" --write-vocab "$VOCAB" ||
    { echo "RESULT job: no vocab.txt and none could be made (scripts/fetch_vocab.sh, or VOCAB=...)"; exit 1; }
  echo "RESULT job: no bert-base-uncased vocab.txt (scripts/device-check.sh --fetch-deps carries it): a made-up vocab"
fi

if [ -n "${IMDB:-}" ]; then
  SRC=$IMDB
  SPLIT=${SPLIT:-35000,5000,10000}
else
  SRC=$DATA/corpus-$TEXTS
  if [ ! -d "$SRC/aclImdb" ]; then
    t=$(date +%s.%N)
    rm -rf "$SRC.tmp" && "$PYTHON" "$ROOT/bench/gpu/make_imdb.py" "$SRC.tmp" --texts "$TEXTS" --vocab "$VOCAB" &&
      mv "$SRC.tmp" "$SRC" || { echo "RESULT job: make_imdb.py failed"; exit 1; }
    printf "corpus made in %.1f s (not part of the job)\n" "$(since "$t")"
  fi
  # the seed's split scaled to the corpus: 70 % / 10 % / 20 %
  SPLIT=${SPLIT:-$((TEXTS * 7 / 10)),$((TEXTS / 10)),$((TEXTS - TEXTS * 7 / 10 - TEXTS / 10))}
fi

rc=0
for run in $(seq 1 "$RUNS"); do
  W=$DATA/run$run
  rm -rf "$W"
  [ "$run" = 1 ] && rm -rf "$DATA/cache"   # the first run tokenizes: the cache is part of the job
  t=$(date +%s.%N)
  ${APP_TIMEOUT:+timeout -k 5 "$APP_TIMEOUT"} "$APP" fit --config "$ROOT/seed.json" --data.source "imdb:$SRC" --data.split "$SPLIT" --data.vocab "$VOCAB" \
    --data.cache_dir "$DATA/cache" --data.max_length "$SEQ" --data.batch_size "$BATCH" \
    --model.preset "$PRESET" --trainer.max_epochs "$EPOCHS" --trainer.precision "$PRECISION" \
    --trainer.accelerator "$ACCELERATOR" --trainer.compile "$([ "$COMPILE" = 1 ] && echo true || echo false)" \
    --checkpoint.async_save "$([ "$ASYNC" = 1 ] && echo true || echo false)" \
    --trainer.default_root_dir "$W" --trainer.enable_progress_bar false --trainer.profiler simple \
    $([ "$THROUGHPUT" = 1 ] && echo --throughput.enabled true --throughput.window_size 50) ${EXTRA:-} 2>&1 |
    tee "$W.log"
  rc=${PIPESTATUS[0]}
  wall=$(since "$t")
  fit=$(sed -n 's/^Time elapsed \([0-9.]*\) min$/\1/p' "$W.log" | tail -1)
  tok=$(sed -n 's/^tokenized to [0-9]* tokens in \([0-9.]*\) s (\(.*\))$/\1 s (\2)/p' "$W.log" | tail -1)
  rd=$(sed -n 's/.*; read in \([0-9.]*\) s$/\1/p' "$W.log" | head -1)
  acc=$(sed -n 's/^Test accuracy \([0-9.]*\)$/\1/p' "$W.log" | tail -1)
  [ "$COMPILE" = 1 ] && grep -h '^compile: ' "$W.log" | sed 's/^/RESULT job: run '"$run"': /'
  if [ "$THROUGHPUT" = 1 ]; then   # the ThroughputMonitor's training rates: medians over the logged windows
    csv=$(ls -t "$W"/lightning_logs/version_*/metrics.csv 2>/dev/null | head -1)
    [ -n "$csv" ] && "$PYTHON" - "$csv" "$run" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def med(k):
    v = [float(r[k]) for r in rows if r.get(k, '') != '']
    return ('%.4g' % statistics.median(v)) if v else '-'
print('RESULT job: run %s: throughput (medians of 50-batch windows): samples/s=%s tokens/s=%s TFLOP/s=%s mfu=%s'
      % (sys.argv[2], med('train/device/samples_per_sec'), med('train/device/items_per_sec'),
         med('train/device/flops_per_sec') if med('train/device/flops_per_sec') == '-' else
         '%.4g' % (float(med('train/device/flops_per_sec')) / 1e12), med('train/device/mfu')))
PY
  fi
  # where the minute went: the profiler's main rows (the FIT and TEST tables)
  awk -v r="$run" '/ Profiler Report$/ { stage = $1 }
    stage && /^\|  (Total|run_training_batch|run_training_epoch|validation_step|test_step|setup|load_checkpoint|train_dataloader_next|\[Callback\]ModelCheckpoint\.on_(validation_end|fit_end)) / {
      gsub(/  +/, " "); print "RESULT job: run " r ": " stage " " $0 }' "$W.log"
  printf 'RESULT job: run %d: %s wall_s=%.1f fit_min=%s read_s=%s tokenize=%s test_acc=%s rc=%d (%s %s x %s, %s epochs, %s%s, %s)\n' \
    "$run" "$([ "$run" = 1 ] && echo "first (tokenizes)" || echo "again (token cache)")" "$wall" "${fit:-?}" \
    "${rd:-?}" "${tok:-?}" "${acc:-?}" "$rc" "$PRESET" "$BATCH" "$SEQ" "$EPOCHS" "$PRECISION" \
    "$([ "$COMPILE" = 1 ] && echo +compile)$([ "$ASYNC" = 1 ] && echo ', async checkpoints')" "$ACCELERATOR"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then   # stopped: how far it got (the CSV logger's last row)
    csv=$(ls -t "$W"/lightning_logs/version_*/metrics.csv 2>/dev/null | head -1)
    echo "RESULT job: run $run: stopped after ${APP_TIMEOUT}s; metrics.csv: $(head -1 "$csv" 2>/dev/null | cut -c1-80) | last row: $(tail -1 "$csv" 2>/dev/null | cut -c1-120)"
  fi
  [ "$rc" = 0 ] || break
done
exit "$rc"
