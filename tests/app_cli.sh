#!/usr/bin/env bash
# The apps as a new user meets them (issue 14), on tiny data:
#   app_cli.sh TEXT_APP FASHION_APP WORKDIR SEED_JSON FIXTURE [VOLT_PLOT]
# config files + overrides + --print-config round trip, "did you mean", exit 2 for usage
# errors, --version; the committed seed.json is the recipe; fit then `test` on the checkpoint
# without training gives the same accuracy; `predict` writes CSV/JSONL; --pretrained reads
# config.json (any shape) and tokenizer_config.json; drop_last; lr-Adam column and the
# log_every_n_steps warning; model summary and results tables; epochs 0-based in the bar and
# the checkpoint names; --trainer.devices N self-launches through mpirun (a recording
# stand-in for mpirun) and a distributed strategy on one process says so. null only for the
# nullable keys (exit 2 naming the key for the others, never a crash); volt-plot --out DIR.
set -uo pipefail
APP=${1:?text app}; FM=${2:?fashion app}; W=${3:?workdir}; SEED=${4:?seed.json}; FIX=${5:?fixture}; PLOT=${6:-}
rm -rf "$W" && mkdir -p "$W" || exit 1
die() { echo "app_cli: FAILED: $*"; exit 1; }
printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]' the a movie film plot acting was is \
    good great fine nice fun bad awful poor dull terrible and but very really '##s' '.' ',' >"$W/vocab.txt"
POS=(good great fine nice fun); NEG=(bad awful poor dull terrible); NOUN=(movie film plot acting)
{
    echo 'text,label'
    for i in $(seq 0 59); do
        n=${NOUN[$((i % 4))]}
        if ((i % 2)); then echo "\"the $n was very ${POS[$((i % 5))]}, really ${POS[$(((i / 2) % 5))]}.\",1"
        else echo "\"the $n was very ${NEG[$((i % 5))]}, really ${NEG[$(((i / 2) % 5))]}.\",0"; fi
    done
} >"$W/tiny.csv"
C=(--data "csv:$W/tiny.csv" --vocab "$W/vocab.txt" --model-preset tiny --max-length 16 --cache-dir "$W/cache"
   --root "$W/runs" --workers 0)

# ---- configuration ----
"$APP" "${C[@]}" --batch-size 5 --trainer.max_epochs=2 --optimizer.lr 1e-3 --print-config >"$W/cfg.json" 2>"$W/cfg.err" ||
    { cat "$W/cfg.err"; die "--print-config"; }
grep -q '"batch_size":	5' "$W/cfg.json" && grep -q '"max_epochs":	2' "$W/cfg.json" || die "--print-config lacks the overrides"
"$APP" --config "$W/cfg.json" --print-config >"$W/cfg2.json" && cmp -s "$W/cfg.json" "$W/cfg2.json" || die "printed config is not reusable"
"$APP" --config "$W/cfg.json" --data.batch_size 6 --print-config >"$W/cfg3.json"
grep -q '"batch_size":	6' "$W/cfg3.json" || die "command line over --config"
# a config the trainer refuses: printed (to be edited, as LightningCLI's), with the refusal on stderr;
# run as it is, it exits 2 with the same words
"$APP" "${C[@]}" --trainer.strategy single --trainer.devices 2 --print-config >"$W/bad.json" 2>"$W/e.log" ||
    die "--print-config of a refused config: exit $?: $(cat "$W/e.log")"
grep -q '"devices":	2' "$W/bad.json" && grep -q "warning: the trainer refuses this config: .*devices" "$W/e.log" ||
    die "--print-config of a refused config says nothing: $(cat "$W/e.log")"
"$APP" --config "$W/bad.json" >"$W/e2.log" 2>&1; rc=$?
[[ $rc == 2 ]] && grep -q "devices" "$W/e2.log" || die "the refused config ran: exit $rc: $(cat "$W/e2.log")"
"$APP" --trainer.max_epoch 3 >"$W/e.log" 2>&1; rc=$?
[[ $rc == 2 ]] && grep -q "did you mean '--trainer.max_epochs'" "$W/e.log" || die "typo: exit $rc: $(cat "$W/e.log")"
"$FM" --lr=abc >"$W/e.log" 2>&1; [[ $? == 2 ]] || die "fashion: bad value must exit 2"
"$FM" --epochs >"$W/e.log" 2>&1; [[ $? == 2 ]] || die "fashion: missing value must exit 2"
# --export_full's path is checked before anything runs (not after the whole fit and test)
for p in "" "$W" "$W/no_such_dir/x.safetensors"; do
    "$FM" --export_full "$p" --epochs 1 >"$W/e.log" 2>&1; rc=$?
    [[ $rc == 2 ]] && grep -q -- "--export_full '$p': " "$W/e.log" && ! grep -q "Epoch" "$W/e.log" ||
        die "--export_full '$p': exit $rc: $(cat "$W/e.log")"
done
"$FM" --trainer.max_epochs --no-progress >"$W/e.log" 2>&1; rc=$?
[[ $rc == 2 ]] && grep -q -- "--trainer.max_epochs needs a value" "$W/e.log" || die "missing value before an option: exit $rc: $(cat "$W/e.log")"
# null: a usage error naming the key, at parse time, for every key the apps read as a string or
# a number (these crashed or ran with 0); the nullable keys (default null) still take it
T=(fit --data.source "csv:$W/tiny.csv" --model.preset small --data.max_length 32)
for kv in "model.name" "data.path" "data.batch_size" "trainer.seed" "trainer.precision"; do
    "$FM" fit --$kv null >"$W/e.log" 2>&1; rc=$?
    [[ $rc == 2 ]] && grep -q -- "--$kv: null is not allowed" "$W/e.log" || die "fashion --$kv null: exit $rc: $(cat "$W/e.log")"
done
echo '{"model": {"name": null}}' >"$W/null.json"
"$FM" fit --config "$W/null.json" >"$W/e.log" 2>&1; rc=$?
[[ $rc == 2 ]] && grep -q "model.name: null is not allowed (a string is required" "$W/e.log" || die "fashion config name null: exit $rc: $(cat "$W/e.log")"
for kv in optimizer.name optimizer.lr_schedule checkpoint.mode optimizer.lr data.batch_size data.max_length trainer.seed \
          data.source model.preset predict.input data.num_workers weight_averaging.mode checkpoint.save_top_k; do
    "$APP" "${T[@]}" --$kv null >"$W/e.log" 2>&1; rc=$?
    [[ $rc == 2 ]] && grep -q -- "--$kv: null is not allowed" "$W/e.log" || die "text --$kv null: exit $rc: $(cat "$W/e.log")"
done
"$APP" "${T[@]}" --lr null >"$W/e.log" 2>&1; rc=$?
[[ $rc == 2 ]] && grep -q -- "--lr (optimizer.lr): null is not allowed (a number in \[1e-12, 1000\] is required)" "$W/e.log" ||
    die "text --lr null: exit $rc: $(cat "$W/e.log")"
"$APP" "${T[@]}" --data.batch_size 0 >"$W/e.log" 2>&1
grep -qF "want an integer in [1, 1048576]" "$W/e.log" || die "integer bounds: $(cat "$W/e.log")"
"$APP" "${T[@]}" --data.split null --data.vocab null --data.lowercase null --model.num_classes null --model.attention_dropout null \
    --optimizer.no_decay null --ckpt_path null --checkpoint.monitor null --checkpoint.filename null --trainer.max_time null \
    --print-config >"$W/nulls.json" 2>"$W/e.log" || die "nullable keys refused: $(cat "$W/e.log")"
grep -qF '"monitor":	null' "$W/nulls.json" || die "checkpoint.monitor null not in the config"
"$APP" --help >"$W/help_text.txt"; grep -qF "(default: val_acc; or null)" "$W/help_text.txt" || die "--help: checkpoint.monitor's default and nullability"
"$FM" --model.lr null --model.dropout null --print-config >/dev/null 2>"$W/e.log" || die "fashion model.lr null: $(cat "$W/e.log")"
"$APP" --version >"$W/version.txt"; grep -q '^volt-text-classification (volt ' "$W/version.txt" || die "--version"
"$FM" --help >"$W/help.txt"; grep -q -- '--trainer.accumulate_grad_batches' "$W/help.txt" || die "fashion --help lacks trainer keys"
# fashion: max_epochs -1 is no limit (max_steps ends the run), null the model's default (mlp 15)
if [[ -r /usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz ]]; then
    FL=(--root "$W/runs_fm" --workers 0 --no-progress --limit-train-batches 1 --limit-val-batches 1 --num-sanity-val-steps 0
        --trainer.enable_logger false --trainer.enable_checkpointing false --checkpoint.on_exception false --test_after_fit false)
    "$FM" "${FL[@]}" --epochs -1 --max-steps 3 >"$W/fm.log" 2>&1 && grep -q "mlp, no epoch limit" "$W/fm.log" ||
        die "fashion --epochs -1: $(cat "$W/fm.log")"
    "$FM" "${FL[@]}" --trainer.max_epochs null --max-steps 1 >"$W/fm.log" 2>&1 && grep -q "mlp, 15 epochs" "$W/fm.log" ||
        die "fashion --trainer.max_epochs null: $(cat "$W/fm.log")"
    # --model.lr null / --model.dropout null: the model's defaults (not lr 0, dropout 0)
    for r in a b; do
        extra=(); [[ $r == b ]] && extra=(--model.lr null --model.dropout null)
        "$FM" "${FL[@]}" --root "$W/runs_fm_$r" --trainer.enable_logger true --trainer.log_every_n_steps 1 --max-steps 3 \
            "${extra[@]}" >"$W/fm.log" 2>&1 || die "fashion run $r: $(cat "$W/fm.log")"
    done
    cmp -s "$W"/runs_fm_a/lightning_logs/version_0/metrics.csv "$W"/runs_fm_b/lightning_logs/version_0/metrics.csv ||
        die "fashion --model.lr null --model.dropout null is not the default run"
    [[ ! -e $W/runs_fm/checkpoints ]] || die "--trainer.enable_checkpointing false wrote $(find "$W/runs_fm" -type f)"
fi
# the committed seed.json is the seed's recipe
"$APP" --config "$SEED" --print-config >"$W/seed.out" || die "seed.json does not load"
for kv in '"batch_size":	12' '"max_length":	512' '"lr":	5e-05' '"name":	"adam"' '"lr_schedule":	"constant"' \
          '"max_epochs":	3' '"monitor":	"val_acc"' '"test_after_fit":	true' '"source":	"imdb:aclImdb"'; do
    grep -qF "$kv" "$W/seed.out" || die "seed.json: no $kv"
done

# ---- fit (progress bar on: plain lines when not a terminal) ----
"$APP" fit "${C[@]}" --epochs 2 --batch-size 5 --optimizer.lr 1e-3 --data.drop_last true >"$W/fit.log" 2>"$W/fit.err" ||
    { cat "$W/fit.err"; die "fit"; }
grep -q "Epoch 1/1: 9/9 " "$W/fit.err" || die "bar: want 'Epoch 1/1: 9/9' (0-based epochs; 48 texts / 5 with drop_last = 9): $(grep Epoch "$W/fit.err" | tail -2)"
! grep -q "Epoch 2/" "$W/fit.err" || die "bar counts epochs from 1"
ls "$W"/runs/checkpoints/csv-tiny/ | grep -q 'epoch=[01]-' || die "no epoch=0/1 checkpoint"
! ls "$W"/runs/checkpoints/csv-tiny/ | grep -q 'epoch=2' || die "a checkpoint named epoch=2 after 2 epochs"
grep -q "smaller than the logging interval" "$W/fit.err" || die "no log_every_n_steps warning"
# the library's warning names the config field first, the app's flag only beside it
grep -q "Set a lower value for log_every_n_steps (--trainer.log_every_n_steps)" "$W/fit.err" ||
  die "the warning does not name the field log_every_n_steps: $(grep 'logging interval' "$W/fit.err")"
grep -q "Total params" "$W/fit.log" && grep -q "Test metric" "$W/fit.log" && grep -q "DataLoader 0" "$W/fit.log" || die "summary / results tables"
tl=$(grep -E "^Testing: .*/.*\[" "$W/fit.err" | tail -1)
! grep -q "train_loss" <<<"$tl" || die "the Testing line shows training metrics: $tl"
best=$(sed -n 's/^best checkpoint: \(.*\) (val_acc .*/\1/p' "$W/fit.log")
acc=$(sed -n 's/^Test accuracy //p' "$W/fit.log")
[[ -f $best && -n $acc ]] || die "no best checkpoint / test accuracy: $(cat "$W/fit.log")"
ld=$(sed -n 's/^logs: //p' "$W/fit.log")
[[ -s $ld/hparams.json && -s $ld/loss.svg ]] || die "no merged config / plots beside the logs in '$ld'"
grep -q '"max_length":	16' "$ld/hparams.json" || die "hparams.json is not the merged config"
# the logs' config.json (the trainer's, flat) given to --config: pointed at hparams.json
"$APP" --config "$ld/config.json" --print-config >"$W/e.log" 2>&1; rc=$?
[[ $rc == 2 ]] && grep -q "looks like a trainer's config, as the logs' config.json: a run's whole config is the hparams.json" "$W/e.log" ||
    die "--config config.json: exit $rc: $(cat "$W/e.log")"
# volt-plot --out: an existing folder gets the files inside it, anything else is a prefix
if [[ -n $PLOT ]]; then
    mkdir -p "$W/plots"
    "$PLOT" "$ld/metrics.csv" --out "$W/plots" >"$W/plot.log" 2>&1 || die "volt-plot --out DIR: $(cat "$W/plot.log")"
    [[ -s $W/plots/loss.svg && ! -e $W/plotsloss.svg ]] && grep -qF "wrote $W/plots/loss.svg" "$W/plot.log" ||
        die "volt-plot --out DIR: $(cat "$W/plot.log")"
    "$PLOT" "$ld/metrics.csv" --out "$W/plots/run1-" >"$W/plot.log" 2>&1 && [[ -s $W/plots/run1-loss.svg ]] ||
        die "volt-plot --out PREFIX: $(cat "$W/plot.log")"
fi
# test a checkpoint without training: same accuracy as fit's test on the best
"$APP" test "${C[@]}" --batch-size 5 --ckpt_path "$best" >"$W/test.log" 2>&1 || { cat "$W/test.log"; die "test subcommand"; }
! grep -q "Time elapsed" "$W/test.log" || die "test trained"
[[ $(sed -n 's/^Test accuracy //p' "$W/test.log") == "$acc" ]] || die "test on '$best' gives $(sed -n 's/^Test accuracy //p' "$W/test.log"), fit's test gave $acc"
"$APP" validate "${C[@]}" --ckpt_path last >"$W/val.log" 2>&1 && grep -q "Validate metric" "$W/val.log" || { cat "$W/val.log"; die "validate"; }
"$APP" test "${C[@]}" >"$W/e.log" 2>&1; [[ $? == 2 ]] && grep -q "needs --ckpt_path" "$W/e.log" || die "test without a checkpoint: want exit 2"
# lr column
"$APP" fit "${C[@]}" --epochs 1 --root "$W/runs_lr" --trainer.log_every_n_steps 1 --no-progress >"$W/lr.log" 2>&1 || die "lr run"
head -1 "$W"/runs_lr/lightning_logs/version_0/metrics.csv | grep -q "lr-Adam" || die "no lr-Adam column"
# null given for a nullable key is its default (the model's attention dropout, the corpus's classes), not 0
"$APP" fit "${C[@]}" --epochs 1 --root "$W/runs_lr_null" --trainer.log_every_n_steps 1 --no-progress \
    --model.attention_dropout null --model.num_classes null >"$W/lrn.log" 2>&1 || die "null run: $(cat "$W/lrn.log")"
cmp -s "$W"/runs_lr/lightning_logs/version_0/metrics.csv "$W"/runs_lr_null/lightning_logs/version_0/metrics.csv ||
    die "--model.attention_dropout null --model.num_classes null is not the default run"
! grep -q "smaller than the logging interval" "$W/lr.log" || die "warning with log_every_n_steps 1"

# ---- a walkthrough's findings ----
TINY=(--epochs 1 --limit-train-batches 1 --limit-val-batches 1 --limit-test-batches 1 --no-progress)
# a printed config and a run's hparams.json run as they are: their keys at the default values
# (early_stopping.mode, finetuning.*, tuner.*, timer.*, ...) are not "set without their main key"
"$APP" fit --config "$W/cfg.json" "${TINY[@]}" --root "$W/runs_rt" >"$W/rt.log" 2>&1 || die "--config of --print-config's output: $(cat "$W/rt.log")"
! grep -q "^note: " "$W/rt.log" || die "--config of --print-config's output gives notes: $(grep '^note: ' "$W/rt.log")"
"$APP" fit --config "$ld/hparams.json" "${TINY[@]}" --root "$W/runs_rt2" >"$W/rt.log" 2>&1 || die "--config hparams.json: $(cat "$W/rt.log")"
# ... but a default value on the command line still counts, and so does a file's other value
"$APP" fit "${C[@]}" "${TINY[@]}" --root "$W/runs_rt3" --early_stopping.mode min >"$W/e.log" 2>&1; rc=$?
[[ $rc == 1 ]] && grep -q -- "--early_stopping.mode is set but early_stopping.monitor is not" "$W/e.log" || die "orphan key: exit $rc: $(cat "$W/e.log")"
sed 's/"steps_per_trial":	3/"steps_per_trial":	4/' "$W/cfg.json" >"$W/cfg_tuner.json"
"$APP" fit --config "$W/cfg_tuner.json" "${TINY[@]}" --root "$W/runs_rt3" >"$W/e.log" 2>&1; rc=$?
[[ $rc == 2 ]] && grep -q -- "--tuner.steps_per_trial is set but tuner.scale_batch_size is null" "$W/e.log" || die "orphan key in a file: exit $rc: $(cat "$W/e.log")"
if [[ -r /usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz ]]; then
    "$FM" --print-config >"$W/fm.json" && "$FM" --config "$W/fm.json" --root "$W/runs_fm_rt" --workers 0 --max-steps 1 \
        --limit-val-batches 1 --limit-test-batches 1 --no-progress >"$W/fmrt.log" 2>&1 || die "fashion --config of --print-config: $(cat "$W/fmrt.log")"
    "$FM" --config "$W/runs_fm_rt/lightning_logs/version_0/hparams.json" --max-steps 1 --limit-val-batches 1 --limit-test-batches 1 \
        >"$W/fmrt.log" 2>&1 || die "fashion --config hparams.json: $(cat "$W/fmrt.log")"
fi
# --no-cache: nothing read from or written to the cache
"$APP" --no-cache --print-config | grep -qF '"no_cache":	true' || die "--no-cache does not set data.no_cache true"
"$APP" fit "${C[@]}" "${TINY[@]}" --cache-dir "$W/nocache" --no-cache --root "$W/runs_nc" >"$W/nc.log" 2>&1 || die "--no-cache: $(cat "$W/nc.log")"
[[ -z $(find "$W/nocache" -type f 2>/dev/null) ]] || die "--no-cache wrote $(find "$W/nocache" -type f)"
# names that would write outside the run's folder: usage errors naming the key, nothing written
mkdir -p "$W/esc/a/b/c"
for kv in "checkpoint.filename ../../../escaped-{epoch}" "checkpoint.filename sub/x" "trainer.logger_name ../../logesc" "trainer.logger_name .."; do
    read -r k v <<<"$kv"
    "$APP" fit "${C[@]}" "${TINY[@]}" --root "$W/esc/a/b/c" "--$k" "$v" >"$W/e.log" 2>&1; rc=$?
    [[ $rc == 2 ]] && grep -qF -- "bad value '$v' for --$k: " "$W/e.log" || die "--$k '$v': exit $rc: $(cat "$W/e.log")"
done
[[ -z $(find "$W/esc" -type f) ]] || die "an escaping name wrote $(find "$W/esc" -type f)"
# ckpt_path last outside fit: the newest of last*, on_exception (here the only one)
mkdir -p "$W/runs_exc/checkpoints/csv-tiny" && cp "$best" "$W/runs_exc/checkpoints/csv-tiny/on_exception.safetensors" || die "cp"
"$APP" test "${C[@]}" --batch-size 5 --root "$W/runs_exc" --ckpt_path last --no-progress >"$W/exc.log" 2>&1 ||
    die "test --ckpt_path last with on_exception.safetensors alone: $(cat "$W/exc.log")"
[[ $(sed -n 's/^Test accuracy //p' "$W/exc.log") == "$acc" ]] || die "test --ckpt_path last (on_exception): $(cat "$W/exc.log")"
echo "the movie was very good" | "$APP" predict "${C[@]}" --root "$W/runs_exc" --ckpt_path last >"$W/excp.csv" 2>"$W/e.log" &&
    [[ $(wc -l <"$W/excp.csv") == 2 ]] || die "predict --ckpt_path last (on_exception): $(cat "$W/e.log")"
"$APP" test "${C[@]}" --root "$W/runs_none" --ckpt_path last >"$W/e.log" 2>&1; rc=$?
[[ $rc == 1 ]] && grep -q "no checkpoint for --ckpt_path last" "$W/e.log" || die "test --ckpt_path last, none: exit $rc: $(cat "$W/e.log")"
# parse-time usage errors (exit 2, before any data is read: the data file does not exist)
N=(--data "csv:$W/no_such.csv" --vocab "$W/vocab.txt" --root "$W/runs_none")
usage() {   # usage WANT ARGS...: exit 2 and WANT in the message
    local want=$1; shift
    "$@" >"$W/e.log" 2>&1; local rc=$?
    [[ $rc == 2 ]] && grep -qF -- "$want" "$W/e.log" || die "$*: exit $rc, want 2 and '$want': $(cat "$W/e.log")"
}
usage "unexpected argument 'foo'" "$FM" --epochs 1 -- foo
usage "unknown option '-epochs'; did you mean '--epochs'?" "$FM" -epochs 4
usage "want an integer in [0, 9007199254740992]" "$FM" --seed 10000000000000000
usage "--config needs a value (the next argument '--print-config' is an option)" "$FM" --config --print-config
usage "bad value 'abc' for --timer.duration: want \"DD:HH:MM:SS\"" "$APP" fit "${N[@]}" --timer.duration abc
usage "--export_full is written after a test, and validate runs none" "$APP" validate "${N[@]}" --ckpt_path last --export-full "$W/x.st"
usage "--test_after_fit false runs none" "$APP" fit "${N[@]}" --test_after_fit false --export-full "$W/x.st"
usage "--trainer.limit_test_batches 0 runs none" "$FM" --limit-test-batches 0 --export-full "$W/x.st"
"$FM" --seed 9007199254740991 --print-config | grep -qF '"seed":	9007199254740991,' || die "--print-config loses an integer's digits"
# limit_test_batches 0: the test is skipped, said (Lightning skips it), not a failure after fit
"$APP" fit "${C[@]}" "${TINY[@]}" --limit-test-batches 0 --root "$W/runs_lt0" >"$W/lt0.log" 2>&1 || die "--limit-test-batches 0: $(cat "$W/lt0.log")"
grep -q "^no test: trainer.limit_test_batches is 0" "$W/lt0.log" && ! grep -q "^Test accuracy" "$W/lt0.log" || die "--limit-test-batches 0: $(cat "$W/lt0.log")"

# ---- predict ----
printf 'the movie was very good\nthe plot was awful, really bad.\n\nfine acting\n' >"$W/texts.txt"
"$APP" predict "${C[@]}" --ckpt_path "$best" --predict.input "$W/texts.txt" --predict.output "$W/pred.csv" >"$W/p.log" 2>&1 ||
    { cat "$W/p.log"; die "predict"; }
[[ $(head -1 "$W/pred.csv") == "index,label,probability" && $(wc -l <"$W/pred.csv") == 5 ]] || die "predict CSV: $(cat "$W/pred.csv")"
awk -F, 'NR > 1 && !($2 == 0 || $2 == 1) { exit 1 } NR > 1 && ($3 < 0.5 || $3 > 1) { exit 1 }' "$W/pred.csv" || die "predict rows: $(cat "$W/pred.csv")"
"$APP" predict "${C[@]}" --ckpt_path "$best" --predict.format jsonl <"$W/texts.txt" >"$W/pred.jsonl" 2>"$W/p.err" || { cat "$W/p.err"; die "predict stdin"; }
[[ $(grep -c '^{"index": [0-3], "label": [01], "probability": 0\.[5-9][0-9]*\|1\.0*}$' "$W/pred.jsonl") == 4 ]] || die "predict JSONL: $(cat "$W/pred.jsonl")"
"$APP" predict "${C[@]}" --ckpt_path "$best" --predict.input "$W" >"$W/e.log" 2>&1; rc=$?
[[ $rc == 1 ]] && grep -q "predict.input '$W': Is a directory" "$W/e.log" || die "a folder as predict.input: exit $rc: $(cat "$W/e.log")"
# a predict that fails (a checkpoint of another shape) leaves an earlier predict.output whole, and no temporary file
cp "$W/pred.csv" "$W/pred_keep.csv"
"$APP" predict "${C[@]}" --model-preset small --ckpt_path "$best" --predict.input "$W/texts.txt" --predict.output "$W/pred.csv" \
    >"$W/e.log" 2>&1; rc=$?
[[ $rc == 1 ]] && grep -q "shape mismatch" "$W/e.log" || die "predict with a checkpoint of another shape: exit $rc: $(cat "$W/e.log")"
cmp -s "$W/pred.csv" "$W/pred_keep.csv" || die "a failed predict clobbered predict.output: $(cat "$W/pred.csv")"
[[ -z $(find "$W" -maxdepth 1 -name 'pred.csv.*') ]] || die "a failed predict left a temporary file: $(ls "$W")"
# a predict that succeeds over an existing file keeps its permission bits; through a symbolic link
# it writes the link's target (the link stays a link)
chmod 640 "$W/pred.csv"
"$APP" predict "${C[@]}" --ckpt_path "$best" --predict.input "$W/texts.txt" --predict.output "$W/pred.csv" >"$W/p.log" 2>&1 ||
    { cat "$W/p.log"; die "predict over an existing file"; }
[[ $(stat -c %a "$W/pred.csv") == 640 ]] || die "predict.output's mode became $(stat -c %a "$W/pred.csv"), was 640"
ln -sf pred.csv "$W/pred_link.csv"
"$APP" predict "${C[@]}" --ckpt_path "$best" --predict.input "$W/texts.txt" --predict.output "$W/pred_link.csv" >"$W/p.log" 2>&1 ||
    { cat "$W/p.log"; die "predict through a link"; }
[[ -L "$W/pred_link.csv" && $(wc -l <"$W/pred.csv") == 5 ]] || die "predict replaced the symbolic link predict.output"

# ---- --pretrained with config.json: the shape comes from the folder, not --model-preset ----
mkdir -p "$W/hf"
cp "$FIX" "$W/hf/model.safetensors" && cp "$W/vocab.txt" "$W/hf/vocab.txt" || die "fixture"
cat >"$W/hf/config.json" <<'JSON'
{"model_type": "distilbert", "vocab_size": 97, "max_position_embeddings": 16, "dim": 32, "n_layers": 2, "n_heads": 4,
 "hidden_dim": 64, "dropout": 0.0, "attention_dropout": 0.0, "seq_classif_dropout": 0.2, "activation": "gelu",
 "initializer_range": 0.02, "pad_token_id": 0}
JSON
echo '{"do_lower_case": true}' >"$W/hf/tokenizer_config.json"
awk -F, 'NR == 1 { print; next } { sub(/,[01]$/, "," (NR % 3)); print }' "$W/tiny.csv" >"$W/three.csv"
H=(--data "csv:$W/three.csv" --pretrained "$W/hf" --max-length 16 --cache-dir "$W/cache" --root "$W/runs_hf" --workers 0 --no-progress)
"$APP" fit "${H[@]}" --epochs 1 --limit-train-batches 2 >"$W/hf.log" 2>&1 || { cat "$W/hf.log"; die "--pretrained with config.json (default preset)"; }
grep -q "^Test accuracy" "$W/hf.log" || die "pretrained run"
sed -i 's/"activation": "gelu"/"activation": "relu"/' "$W/hf/config.json"
"$APP" fit "${H[@]}" --epochs 1 >"$W/e.log" 2>&1; [[ $? == 1 ]] && grep -q 'activation "relu" is not supported' "$W/e.log" || die "relu config: $(cat "$W/e.log")"
sed -i 's/"activation": "relu"/"activation": "gelu"/; s/"n_heads": 4/"n_heads": 5/' "$W/hf/config.json"
"$APP" fit "${H[@]}" --epochs 1 >"$W/e.log" 2>&1; grep -q 'not a multiple of n_heads 5' "$W/e.log" || die "bad heads: $(cat "$W/e.log")"
sed -i 's/"n_heads": 5/"n_heads": 4/' "$W/hf/config.json"
echo '{"do_lower_case": "yes"}' >"$W/hf/tokenizer_config.json"
"$APP" fit "${H[@]}" --epochs 1 >"$W/e.log" 2>&1; grep -q 'do_lower_case' "$W/e.log" || die "bad tokenizer_config: $(cat "$W/e.log")"
echo '{"do_lower_case": true}' >"$W/hf/tokenizer_config.json"
# another architecture's config.json (bert-base's model_type) is refused as unsupported, not "corrupt"; so
# is sinusoidal_pos_embds true (HF keeps those positions fixed, volt would train them)
sed -i 's/"model_type": "distilbert"/"model_type": "bert"/' "$W/hf/config.json"
"$APP" fit "${H[@]}" --epochs 1 >"$W/e.log" 2>&1; rc=$?
[[ $rc == 1 ]] && grep -q 'model_type is bert, want "distilbert"' "$W/e.log" && grep -q '(unsupported' "$W/e.log" &&
    ! grep -q 'corrupt' "$W/e.log" || die "bert config.json: exit $rc: $(cat "$W/e.log")"
sed -i 's/"model_type": "bert"/"model_type": "distilbert", "sinusoidal_pos_embds": true/' "$W/hf/config.json"
"$APP" fit "${H[@]}" --epochs 1 >"$W/e.log" 2>&1; rc=$?
[[ $rc == 1 ]] && grep -q 'sinusoidal_pos_embds true is not supported' "$W/e.log" || die "sinusoidal config.json: exit $rc: $(cat "$W/e.log")"
sed -i 's/, "sinusoidal_pos_embds": true//' "$W/hf/config.json"
# a --pretrained folder without vocab.txt falls back to ~/.cache's vocab, and says so
mkdir -p "$W/hf_novocab" "$W/home/.cache/volt/bert-base-uncased"
cp "$W/hf/config.json" "$W/hf/model.safetensors" "$W/hf/tokenizer_config.json" "$W/hf_novocab/" &&
    cp "$W/vocab.txt" "$W/home/.cache/volt/bert-base-uncased/vocab.txt" || die "hf_novocab"
HOME="$W/home" "$APP" fit "${H[@]}" --pretrained "$W/hf_novocab" --epochs 1 --limit-train-batches 1 >"$W/nv.log" 2>&1 ||
    die "--pretrained without vocab.txt: $(cat "$W/nv.log")"
grep -qF "has no vocab.txt: tokenizing with '$W/home/.cache/volt/bert-base-uncased/vocab.txt'" "$W/nv.log" ||
    die "--pretrained without vocab.txt: the fallback vocab is not named: $(cat "$W/nv.log")"

# ---- GradientAccumulationScheduler: --accumulation.scheduling ----
# 60 texts, split 48/6/6, batches of 4: 12 per epoch; 1 per step in epoch 0, 4 from epoch 1 on:
# the last step of epoch 0 is step 11, epoch 1 adds 3 (steps 12-14)
"$APP" fit "${C[@]}" --root "$W/runs_acc" --epochs 2 --batch-size 4 --split 48,6,6 --accumulation.scheduling 1:4 \
    --limit-val-batches 1 --limit-test-batches 1 --trainer.log_every_n_steps 1 --no-progress >"$W/acc.log" 2>&1 ||
    { cat "$W/acc.log"; die "accumulation.scheduling 1:4"; }
python3 - "$W/runs_acc/lightning_logs/version_0/metrics.csv" <<'PY' || die "accumulation.scheduling: the steps per epoch in metrics.csv"
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get('lr-Adam', '') != '']
by = {}
for r in rows: by.setdefault(int(r['epoch']), []).append(int(r['step']))
print('steps by epoch:', by)
sys.exit(0 if by.get(0) == list(range(12)) and by.get(1) == [12, 13, 14] else 1)
PY
for bad in "1:4," "x" "0:2,0:3" "0:0"; do
    "$APP" fit "${C[@]}" --root "$W/runs_acc_bad" --epochs 1 --accumulation.scheduling "$bad" >"$W/e.log" 2>&1; rc=$?
    [[ $rc == 1 ]] && grep -q "GradientAccumulationScheduler" "$W/e.log" || die "schedule '$bad': exit $rc: $(cat "$W/e.log")"
done
"$APP" fit "${C[@]}" --root "$W/runs_acc_bad" --epochs 1 --accumulation.scheduling 0:2 --trainer.accumulate_grad_batches 2 \
    >"$W/e.log" 2>&1; grep -q "set that or the schedule, not both" "$W/e.log" || die "schedule and accumulate_grad_batches: $(cat "$W/e.log")"

# no validation, so no best checkpoint: said before the test on the final weights
"$APP" fit "${C[@]}" --root "$W/runs_noval" --epochs 1 --limit-train-batches 1 --limit-val-batches 0 --limit-test-batches 1 \
    --no-progress >"$W/noval.log" 2>&1 || { cat "$W/noval.log"; die "fit without validation"; }
grep -q "no best checkpoint ('val_acc' was never logged" "$W/noval.log" && grep -q '^Test accuracy' "$W/noval.log" ||
    die "no line saying the test runs without a best checkpoint: $(cat "$W/noval.log")"

# a max length past the preset's positions: a usage error before any data is read
"$APP" fit --data "csv:$W/no_such.csv" --vocab "$W/vocab.txt" --model-preset tiny --max-length 4096 --root "$W/runs_ml" \
    >"$W/e.log" 2>&1; rc=$?
[[ $rc == 2 ]] && grep -q "exceeds the tiny model's" "$W/e.log" || die "--max-length past the preset: exit $rc: $(cat "$W/e.log")"
# a cache folder that is a file: said once, and the run says "no cache"; no monitor: "the latest"
: >"$W/cache_file"
"$APP" fit "${C[@]}" --cache-dir "$W/cache_file" --root "$W/runs_cf" --epochs 1 --limit-train-batches 1 --limit-val-batches 1 \
    --limit-test-batches 1 --checkpoint.monitor null --no-progress >"$W/cf.log" 2>&1 || { cat "$W/cf.log"; die "cache file"; }
[[ $(grep -c "is not a folder: not caching" "$W/cf.log") == 1 ]] && grep -q "(no cache)" "$W/cf.log" &&
    grep -q "^best checkpoint: .*(the latest: no monitor)" "$W/cf.log" || die "cache file / no monitor: $(cat "$W/cf.log")"

# --root "" is the current folder (it wrote /checkpoints and /lightning_logs)
mkdir -p "$W/emptyroot"
(cd "$W/emptyroot" && "$APP" fit "${C[@]}" --root "" --epochs 1 --limit-train-batches 1 --limit-val-batches 1 \
    --limit-test-batches 1 --no-progress >"$W/emptyroot.log" 2>&1) || { cat "$W/emptyroot.log"; die "--root \"\""; }
grep -q "^best checkpoint: \./checkpoints/" "$W/emptyroot.log" && grep -q "^logs: \./lightning_logs/version_0" "$W/emptyroot.log" &&
    [[ -d $W/emptyroot/checkpoints && -d $W/emptyroot/lightning_logs ]] || die "--root \"\": $(cat "$W/emptyroot.log")"

# ---- launching ----
cat >"$W/fake-mpirun" <<EOF2
#!/usr/bin/env bash
echo "\$@" >"$W/mpirun.args"
EOF2
chmod +x "$W/fake-mpirun"
env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u PMIX_RANK -u PMI_RANK MPIRUN="$W/fake-mpirun" \
    "$FM" --trainer.strategy ddp --trainer.devices 2 --epochs 1 >"$W/launch.log" 2>&1 || { cat "$W/launch.log"; die "launch"; }
grep -q -- "--oversubscribe -np 2 -x OMP_NUM_THREADS .*$FM --trainer.strategy ddp --trainer.devices 2 --epochs 1" "$W/mpirun.args" ||
    die "mpirun args: $(cat "$W/mpirun.args" 2>/dev/null)"
env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u PMIX_RANK -u PMI_RANK "$APP" "${C[@]}" --trainer.strategy ddp --epochs 1 \
    --limit-train-batches 1 --limit-val-batches 1 --limit-test-batches 1 --root "$W/runs_one" >"$W/one.log" 2>&1
grep -q "strategy 'ddp' on one process" "$W/one.log" || die "no note for a distributed strategy on one process: $(cat "$W/one.log")"
# the real launcher, when Open MPI is installed: 2 ranks from one command
if command -v mpirun >/dev/null 2>&1; then
    env -u OMPI_COMM_WORLD_SIZE -u PMI_SIZE -u PMIX_RANK -u PMI_RANK OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        VOLT_COMM_TIMEOUT=60 ASAN_OPTIONS=detect_leaks=0 "$APP" "${C[@]}" --root "$W/runs_mpi" --trainer.strategy ddp --trainer.devices 2 --epochs 1 \
        --limit-train-batches 2 --limit-val-batches 1 --limit-test-batches 1 --no-progress >"$W/mpi.log" 2>&1 ||
        { cat "$W/mpi.log"; die "self-launch under mpirun"; }
    grep -q "per rank x 2 ranks" "$W/mpi.log" && [[ $(grep -c '^Test accuracy' "$W/mpi.log") == 1 ]] || die "self-launch: $(cat "$W/mpi.log")"
fi
echo "app_cli: ok"
