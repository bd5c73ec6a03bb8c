#!/usr/bin/env bash
# App smoke test for volt-text-classification (registered by tests/apps.cmake).
#
#   app_text_classification.sh smoke  APP WORKDIR "" APP_CHECK
#                                                   train/val/test the tiny preset on a tiny
#                                                   CSV + vocab, resume it (checked against an
#                                                   uninterrupted run: the same val losses
#                                                   and a bit-identical last checkpoint), and
#                                                   a TSV run
#   app_text_classification.sh cuda APP WORKDIR "" APP_CHECK
#                                                   on the cuda backend (the CUDA simulator:
#                                                   tests/gpu_sim.cmake): the small preset (head
#                                                   dim 64) with bf16-mixed and --compile, resumed
#                                                   and checked bit for bit against an
#                                                   uninterrupted run, and its best checkpoint
#                                                   tested on the cpu backend; the tiny preset
#                                                   (head dim 8) at 32-true against cpu
#   app_text_classification.sh errors APP WORKDIR   bad inputs exit 1 with a clear message (a
#                                                   checkpoint folder that cannot be written:
#                                                   before the first batch)
#   app_text_classification.sh accents APP WORKDIR  the tokenizer's accents as Hugging Face's
#                                                   BertTokenizer: stripped only when lowercasing
#                                                   unless data.strip_accents or tokenizer_config
#                                                   .json's strip_accents says otherwise (a cased
#                                                   vocab keeps "Café"; the ids read from the
#                                                   token cache); --export-hf writes it and
#                                                   --pretrained reads it back
#   app_text_classification.sh fingerprint APP WORKDIR "" APP_CHECK
#                                                   --resume checks the data, vocab and
#                                                   --pretrained folder by content: the same
#                                                   files by other paths (relative from another
#                                                   folder, through a symlink) resume; another
#                                                   file at the same path is refused, naming it;
#                                                   a checkpoint with the older path-based
#                                                   fingerprint resumes by the same paths and is
#                                                   refused, naming the path, by others
#   app_text_classification.sh dist APP WORKDIR VOLT_RUN APP_CHECK
#                                                   the tiny preset under fsdp on 2 ranks with
#                                                   --memory-report and --export-full, against
#                                                   ddp on 2 ranks (the same dropout masks per
#                                                   rank): weights and val losses to 1e-5;
#                                                   single for names and shapes; --pretrained
#                                                   (a folder without the head) under ddp: the
#                                                   loader's notes printed once, not per rank
#
# Prints "app_text_classification <mode>: ok" when every check passed (ctest matches that
# line), else what failed, and exits 1.
set -uo pipefail
MODE=${1:?mode}
APP=${2:?app}
W=${3:?workdir}
VOLT_RUN=${4:-}
CHECK=${5:-}
rm -rf "$W" && mkdir -p "$W" || exit 1

die() { echo "app_text_classification $MODE: FAILED: $*"; exit 1; }

# A tiny WordPiece vocab (under the tiny preset's 97 rows) and a two-class corpus of
# 60 short reviews built from its words, alternating labels.
printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]' the a movie film plot acting was is \
    good great fine nice fun bad awful poor dull terrible and but very really '##s' '.' ',' \
    >"$W/vocab.txt"
POS=(good great fine nice fun)
NEG=(bad awful poor dull terrible)
NOUN=(movie film plot acting)
{
    echo 'text,label'
    for i in $(seq 0 59); do
        n=${NOUN[$((i % 4))]}
        if ((i % 2)); then
            echo "\"the $n was very ${POS[$((i % 5))]}, really ${POS[$(((i / 2) % 5))]}.\",1"
        else
            echo "\"the $n was very ${NEG[$((i % 5))]}, really ${NEG[$(((i / 2) % 5))]}.\",0"
        fi
    done
} >"$W/tiny.csv"
tail -n +2 "$W/tiny.csv" | sed -e 's/^"\(.*\)",\([01]\)$/\1\t\2/' >"$W/tiny.tsv"

COMMON=(--vocab "$W/vocab.txt" --model-preset tiny --max-length 16 --batch-size 4 --lr 1e-3
        --cache-dir "$W/cache" --root "$W/runs" --no-progress --workers 0)

run() {   # run LOGNAME args...: the app's output goes to $W/LOGNAME.log; returns its status
    local log=$1; shift
    "$APP" "$@" >"$W/$log.log" 2>&1
}

expect_ok() {   # LOGNAME: exit 0, a test accuracy line and the elapsed time line
    local log=$1 rc=$2
    [[ $rc == 0 ]] || { cat "$W/$log.log"; die "$log: exit status $rc, want 0"; }
    grep -Eq '^Test accuracy [01]\.[0-9]{4}$' "$W/$log.log" || { cat "$W/$log.log"; die "$log: no 'Test accuracy' line"; }
    grep -Eq '^Time elapsed [0-9]+\.[0-9]{2} min$' "$W/$log.log" || { cat "$W/$log.log"; die "$log: no 'Time elapsed' line"; }
}

expect_usage() {   # LOGNAME RC PATTERN: a usage error: exit 2 and a message matching PATTERN
    local log=$1 rc=$2 pat=$3
    [[ $rc == 2 ]] || { cat "$W/$log.log"; die "$log: exit status $rc, want 2"; }
    grep -Eq -- "$pat" "$W/$log.log" || { cat "$W/$log.log"; die "$log: message does not match '$pat'"; }
}

expect_err() {   # LOGNAME RC PATTERN: exit 1 and a message matching PATTERN
    local log=$1 rc=$2 pat=$3
    [[ $rc == 1 ]] || { cat "$W/$log.log"; die "$log: exit status $rc, want 1"; }
    grep -Eq -- "$pat" "$W/$log.log" || { cat "$W/$log.log"; die "$log: message does not match '$pat'"; }
}

case "$MODE" in
cuda)
    [[ -n $CHECK ]] || die "cuda needs APP_CHECK"
    CU=(--vocab "$W/vocab.txt" --model-preset small --max-length 16 --batch-size 4 --lr 1e-3 --cache-dir "$W/cache"
        --no-progress --workers 0 --accelerator cuda --precision bf16-mixed --compile --limit-train-batches 3
        --limit-val-batches 2 --limit-test-batches 2 --memory-report)
    run cu1 --data "csv:$W/tiny.csv" "${CU[@]}" --root "$W/runs" --epochs 1; expect_ok cu1 $?
    grep -q 'Accelerator: cuda' "$W/cu1.log" || die "cu1: not on cuda"
    grep -q 'after fit' "$W/cu1.log" || die "cu1: no memory report"
    # 3 batches: the first eager, the second captured, the third a replay
    grep -Eq '^compile: 1 training steps replayed, 1 captured, 1 eager$' "$W/cu1.log" ||
        die "cu1: no 'compile: 1 training steps replayed, 1 captured, 1 eager' line"
    run cu2 --data "csv:$W/tiny.csv" "${CU[@]}" --root "$W/runs" --epochs 2 --resume; expect_ok cu2 $?
    run cufull --data "csv:$W/tiny.csv" "${CU[@]}" --root "$W/runs_full" --epochs 2; expect_ok cufull $?
    step=$("$CHECK" meta "$W/runs/checkpoints/csv-small/last.safetensors" volt.global_step) || die "cu2: no global_step"
    [[ $step == 6 ]] || die "cu2: last checkpoint at global_step $step, want 6 (3 + 3)"
    "$CHECK" same "$W/runs_full/checkpoints/csv-small/last.safetensors" "$W/runs/checkpoints/csv-small/last.safetensors" ||
        die "cuda resume: the last checkpoint differs from the uninterrupted run's"
    best=$(sed -n 's/^best checkpoint: \(.*\) (val_acc .*/\1/p' "$W/cufull.log" | tail -1)
    [[ -f $best ]] || die "cufull: no best checkpoint named"
    run cpu_test test --data "csv:$W/tiny.csv" --vocab "$W/vocab.txt" --model-preset small --max-length 16 \
        --batch-size 4 --cache-dir "$W/cache" --no-progress --workers 0 --accelerator cpu --limit-test-batches 2 \
        --root "$W/runs_cpu" --ckpt_path "$best"
    rc=$?
    [[ $rc == 0 ]] || { cat "$W/cpu_test.log"; die "cpu_test: exit status $rc, want 0"; }
    grep -Eq '^Test accuracy [01]\.[0-9]{4}$' "$W/cpu_test.log" || { cat "$W/cpu_test.log"; die "cpu_test: no 'Test accuracy' line"; }
    # The tiny preset (head dim 8: attention's padded tier on cuda) at 32-true on cuda and on
    # cpu (the same dropout masks): the logged losses and the exported weights agree
    TINY=(--data "csv:$W/tiny.csv" "${COMMON[@]}" --epochs 1 --limit-train-batches 3 --limit-val-batches 2
          --limit-test-batches 2 --precision 32-true)
    # with the ThroughputMonitor and no peak or name given: the device's own name (the
    # simulator's CUDASIM_NAME) picks the peak, H100 SXM's f32 66.9 TFLOP/s at 32-true
    CUDASIM_NAME="NVIDIA H100 80GB HBM3" run tiny_cu "${TINY[@]}" --root "$W/runs_tiny_cu" --accelerator cuda \
        --export-full "$W/tiny_cu.safetensors" --throughput.window_size 2 --trainer.log_every_n_steps 2 --device-stats
    expect_ok tiny_cu $?
    grep -q 'Accelerator: cuda (device 0: NVIDIA H100 80GB HBM3)' "$W/tiny_cu.log" || die "tiny_cu: not on cuda, or no device name"
    python3 - "$W/runs_tiny_cu/lightning_logs/version_0/metrics.csv" <<'PY' || die "tiny_cu: mfu over the device's own peak"
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get('train/device/mfu', '') != '']
ok = len(rows) >= 1
for r in rows:
    f, m = float(r['train/device/flops_per_sec']), float(r['train/device/mfu'])
    ok = ok and f > 0 and abs(m - f / 66.9e12) <= 1e-9 * f / 66.9e12
print('tiny_cu: %d rows with mfu: %s' % (len(rows), [r['train/device/mfu'] for r in rows]))
# --device-stats on cuda: the device's memory (torch.cuda.memory_stats' names), no host stats,
# in the rows of steps 2 (step column 1) and the 3 batches' last
allr = list(csv.DictReader(open(sys.argv[1])))
cur = 'DeviceStatsMonitor.on_train_batch_end/allocated_bytes.all.current'
ds = [r for r in allr if r.get(cur, '') != '']
pre = 'DeviceStatsMonitor.on_train_batch_start/reserved_bytes.all.peak'
ok = ok and [r['step'] for r in ds] == ['1'] and all(float(r[cur]) > 0 and float(r[pre]) > 0 for r in ds)
ok = ok and not any(k.endswith('cpu_percent') for k in allr[0].keys())
print('tiny_cu: device stats at steps %s: %s' % ([r['step'] for r in ds], [r[cur] for r in ds]))
sys.exit(0 if ok else 1)
PY
    run tiny_cpu "${TINY[@]}" --root "$W/runs_tiny_cpu" --accelerator cpu --export-full "$W/tiny_cpu.safetensors"
    expect_ok tiny_cpu $?
    for col in val_loss test_loss; do
        "$CHECK" losses "$W/runs_tiny_cpu/lightning_logs/version_0/metrics.csv" \
            "$W/runs_tiny_cu/lightning_logs/version_0/metrics.csv" 1e-4 0 $col || die "tiny: cuda's $col differs from cpu's"
    done
    "$CHECK" export "$W/tiny_cpu.safetensors" "$W/tiny_cu.safetensors" 1e-5 || die "tiny: cuda's weights differ from cpu's"
    ;;
smoke)
    run csv --data "csv:$W/tiny.csv" "${COMMON[@]}" --epochs 1 --limit-train-batches 3 \
        --limit-val-batches 2 --limit-test-batches 2; expect_ok csv $?
    grep -q 'cache written' "$W/csv.log" || die "csv: the token cache was not written"
    ! grep -q '^compile:' "$W/csv.log" || die "csv: a compile line without --compile"
    ls "$W"/runs/checkpoints/csv-tiny/last.safetensors >/dev/null 2>&1 || die "csv: no last.safetensors"
    ls "$W"/runs/lightning_logs/version_0/metrics.csv >/dev/null 2>&1 || die "csv: no CSV log"
    # Resume the same run for a second epoch (from last.safetensors), tokens from the cache.
    run resume --data "csv:$W/tiny.csv" "${COMMON[@]}" --epochs 2 --limit-train-batches 3 \
        --limit-val-batches 2 --limit-test-batches 2 --resume; expect_ok resume $?
    # a resumed run is a run of its own (docs/RELIABILITY.md): a new version folder
    grep -q 'logs: .*/version_1$' "$W/resume.log" || die "resume: did not log into a new version folder version_1"
    grep -q 'cache hit' "$W/resume.log" || die "resume: the token cache did not hit"
    # ... and it resumed where the first run stopped: an uninterrupted 2-epoch run logs the
    # same losses (the values printed) and leaves the same last checkpoint, bit for bit
    [[ -n $CHECK ]] || die "smoke needs APP_CHECK"
    FULL=()
    for a in "${COMMON[@]}"; do [[ $a == "$W/runs" ]] && FULL+=("$W/runs_full") || FULL+=("$a"); done
    run full --data "csv:$W/tiny.csv" "${FULL[@]}" --epochs 2 --limit-train-batches 3 \
        --limit-val-batches 2 --limit-test-batches 2; expect_ok full $?
    step=$("$CHECK" meta "$W/runs/checkpoints/csv-tiny/last.safetensors" volt.global_step) || die "resume: no global_step"
    [[ $step == 6 ]] || die "resume: last checkpoint at global_step $step, want 6 (3 + 3)"
    "$CHECK" losses "$W/runs_full/lightning_logs/version_0/metrics.csv" \
        "$W/runs/lightning_logs/version_0/metrics.csv+$W/runs/lightning_logs/version_1/metrics.csv" 0 0 val_loss ||
        die "resume: logged validation losses differ from the uninterrupted run's"
    "$CHECK" same "$W/runs_full/checkpoints/csv-tiny/last.safetensors" "$W/runs/checkpoints/csv-tiny/last.safetensors" ||
        die "resume: the last checkpoint differs from the uninterrupted run's"
    # TSV with explicit counts, AdamW + linear schedule over the optimizer steps (10 batches,
    # 2 per step), fused attention, no cache.
    run tsv --data "tsv:$W/tiny.tsv" "${COMMON[@]}" --root "$W/runs_tsv" --epochs 1 --split 40,10,10 --no-cache \
        --attention-dropout 0 --optimizer adamw --weight-decay 0.01 --lr-schedule linear \
        --warmup-steps 2 --trainer.accumulate_grad_batches 2 --trainer.log_every_n_steps 1; expect_ok tsv $?
    grep -q 'split 40/10/10' "$W/tsv.log" || die "tsv: --split 40,10,10 not applied"
    # the schedule spans the fit's 5 optimizer steps: 0, 1/2, 1, 2/3, 1/3 of the lr at steps 0..4
    lrs=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /^lr-/) c = i } NR > 1 && c && $c != "" { printf "%s:%s ", $2, $c }' \
        "$W/runs_tsv/lightning_logs/version_0/metrics.csv")
    python3 -c "
import sys
got = dict(p.split(':') for p in sys.argv[1].split())
want = {'0': 0.0, '1': 5e-4, '2': 1e-3, '3': 1e-3 * 2 / 3, '4': 1e-3 / 3}
sys.exit(0 if sorted(got) == sorted(want) and all(abs(float(got[k]) - v) <= 1e-9 for k, v in want.items()) else 1)" "$lrs" ||
        die "tsv: the linear schedule's lr by step is '$lrs', want 5 optimizer steps (10 batches, 2 a step) after 2 of warmup"
    # --lr-schedule plateau: ReduceLROnPlateau on val_loss after each epoch's validation; at lr 1e-6
    # val_loss moves by less than torch's 1e-4 threshold, so with patience 0 epoch 1 is a bad
    # epoch and epoch 2 trains with half the lr
    run plateau --data "csv:$W/tiny.csv" "${COMMON[@]}" --root "$W/runs_plateau" --epochs 3 --limit-train-batches 2 \
        --limit-val-batches 2 --limit-test-batches 2 --lr-schedule plateau --plateau-patience 0 --plateau-factor 0.5 \
        --lr 1e-6 --trainer.log_every_n_steps 1; expect_ok plateau $?
    lrs=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /^lr-/) c = i } NR > 1 && c && $c != "" { printf "%s:%s ", $2, $c }' \
        "$W/runs_plateau/lightning_logs/version_0/metrics.csv")
    python3 -c "
import sys
got = dict(p.split(':') for p in sys.argv[1].split())
want = {'0': 1e-6, '1': 1e-6, '2': 1e-6, '3': 1e-6, '4': 5e-7, '5': 5e-7}
sys.exit(0 if sorted(got) == sorted(want) and all(abs(float(got[k]) - v) <= 1e-12 for k, v in want.items()) else 1)" "$lrs" ||
        die "plateau: the lr by step is '$lrs', want 1e-6 for epochs 0 and 1, then 5e-7"
    run plateau_warm --data "csv:$W/tiny.csv" "${COMMON[@]}" --root "$W/runs_plateau" --epochs 1 --lr-schedule plateau \
        --warmup-steps 2
    [[ $? != 0 ]] && grep -q 'plateau has no warmup' "$W/plateau_warm.log" || die "plateau: --warmup-steps was not refused"
    # --lr-find: the range test, then fit with its suggestion (the lr the optimizer logs)
    run lrfind --data "csv:$W/tiny.csv" "${COMMON[@]}" --root "$W/runs_lrfind" --epochs 1 --limit-train-batches 3 \
        --limit-val-batches 2 --limit-test-batches 2 --lr-find --trainer.log_every_n_steps 1; expect_ok lrfind $?
    sug=$(sed -n 's/^lr_find: .* steps from 1e-08 to .*; suggested lr \([^,]*\), used for fit$/\1/p' "$W/lrfind.log")
    [[ -n $sug ]] || { cat "$W/lrfind.log"; die "lrfind: no 'lr_find: ... suggested lr X, used for fit' line"; }
    logged=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /^lr-/) c = i } NR > 1 && c && $c != "" { print $c; exit }' \
        "$W/runs_lrfind/lightning_logs/version_0/metrics.csv")
    python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-5 * b else 1)" "$logged" "$sug" ||
        die "lrfind: fit's logged lr '$logged' is not the suggestion '$sug'"
    ls -a "$W/runs_lrfind" | grep -q '^\.lr_find' && die "lrfind: the hidden checkpoint was left behind"
    # resumed with --lr-find (LearningRateFinder): no second search, the first fit's lr from the
    # checkpoint, which the resumed fit's optimizer logs
    run lrfind2 --data "csv:$W/tiny.csv" "${COMMON[@]}" --root "$W/runs_lrfind" --epochs 2 --limit-train-batches 3 \
        --limit-val-batches 2 --limit-test-batches 2 --lr-find --trainer.log_every_n_steps 1 --resume; expect_ok lrfind2 $?
    grep -q "^lr_find: lr $sug from the checkpoint, used for fit$" "$W/lrfind2.log" &&
        grep -q "LearningRateFinder: a resumed fit does not search again" "$W/lrfind2.log" ||
        { cat "$W/lrfind2.log"; die "lrfind resumed: not the first fit's lr ($sug) from the checkpoint"; }
    logged2=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /^lr-/) c = i } NR > 1 && c && $c != "" { print $c; exit }' \
        "$W/runs_lrfind/lightning_logs/version_1/metrics.csv")
    python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-5 * b else 1)" "$logged2" "$sug" ||
        die "lrfind resumed: the logged lr '$logged2' is not the first fit's suggestion '$sug'"
    # --timer.duration (Timer): a limit no epoch fits in, checked at each epoch's end: fit stops
    # after epoch 0 of 3, said once, and the run goes on to test; a malformed duration is a usage
    # error naming it (exit 2, at parse time: nothing read or trained)
    run timer --data "csv:$W/tiny.csv" "${COMMON[@]}" --root "$W/runs_timer" --epochs 3 --limit-train-batches 3 \
        --limit-val-batches 2 --limit-test-batches 2 --timer.duration 00:00:00:0.000001 --timer.interval epoch; expect_ok timer $?
    [[ $(grep -c '^Time limit reached. Elapsed time is 0:00:00. Signaling Trainer to stop.$' "$W/timer.log") == 1 ]] ||
        { cat "$W/timer.log"; die "timer: the limit's line, once"; }
    python3 - "$W/runs_timer/lightning_logs/version_0/metrics.csv" <<'PY' || die "timer: fit went past epoch 0"
import csv, sys
e = {int(r['epoch']) for r in csv.DictReader(open(sys.argv[1])) if r.get('epoch', '') != '' and r.get('test_acc', '') == ''}
sys.exit(0 if e == {0} else 1)
PY
    run e_timer --data "csv:$W/tiny.csv" "${COMMON[@]}" --root "$W/runs_timer" --epochs 1 --timer.duration 1:2
    [[ $? == 2 ]] && grep -qF "bad value '1:2' for --timer.duration: want \"DD:HH:MM:SS\"" "$W/e_timer.log" &&
        ! grep -q "texts, .* classes" "$W/e_timer.log" ||
        { cat "$W/e_timer.log"; die "timer: a malformed duration"; }
    # --tuner.scale_batch_size: Lightning's batch size finder before fit (nothing runs out of
    # memory here: binsearch's 3 trials that ran, 2 4 8, and fit then trains at 8)
    run bsf --data "csv:$W/tiny.csv" "${COMMON[@]}" --root "$W/runs_bsf" --epochs 1 --limit-train-batches 2 \
        --limit-val-batches 2 --limit-test-batches 2 --tuner.scale_batch_size binsearch --tuner.max_trials 3 \
        --tuner.steps_per_trial 1 --throughput.window_size 2 --trainer.log_every_n_steps 2 \
        --lr_monitor.log_momentum --lr_monitor.log_weight_decay; expect_ok bsf $?
    grep -qx 'scale_batch_size (binsearch): 2 4 8; batch size 8 for fit (was 4)' "$W/bsf.log" ||
        { cat "$W/bsf.log"; die "bsf: no 'scale_batch_size (binsearch): 2 4 8; batch size 8 for fit (was 4)' line"; }
    # and the test after fit scales the test loader (6 texts: 2 4 6), as Lightning's on_test_start
    grep -qx "volt: BatchSizeFinder: batch size 6 after 3 trials: test's loader uses it" "$W/bsf.log" ||
        { cat "$W/bsf.log"; die "bsf: the test after fit did not scale its loader"; }
    python3 - "$W/runs_bsf/lightning_logs/version_0/metrics.csv" <<'PY' || die "bsf: fit did not train at batch size 8, or no lr-Adam-momentum / weight_decay"
import csv, sys
r = [r for r in csv.DictReader(open(sys.argv[1])) if r.get('train/samples', '') != '']
ok = r and float(r[0]['train/samples']) == 16   # 2 batches of 8
# --lr_monitor.log_momentum / log_weight_decay: Adam's beta1 and the (default, 0) weight decay
ok = ok and abs(float(r[0]['lr-Adam-momentum']) - 0.9) < 1e-6 and float(r[0]['lr-Adam-weight_decay']) == 0
sys.exit(0 if ok else 1)
PY
    ls -a "$W/runs_bsf" | grep -q '^\.scale_batch_size' && die "bsf: the hidden checkpoint was left behind"
    # resumed: no search, the first fit's size from its checkpoint (the batches it resumes among)
    run bsf2 --data "csv:$W/tiny.csv" "${COMMON[@]}" --root "$W/runs_bsf" --epochs 2 --limit-train-batches 2 \
        --limit-val-batches 2 --limit-test-batches 2 --tuner.scale_batch_size binsearch --tuner.max_trials 3 \
        --tuner.steps_per_trial 1 --throughput.window_size 2 --trainer.log_every_n_steps 2 --resume; expect_ok bsf2 $?
    grep -qx 'scale_batch_size: batch size 8 from the checkpoint for fit (was 4)' "$W/bsf2.log" ||
        { cat "$W/bsf2.log"; die "bsf resumed: no 'batch size 8 from the checkpoint' line"; }
    python3 - "$W/runs_bsf/lightning_logs/version_1/metrics.csv" <<'PY' || die "bsf resumed: fit did not train at batch size 8"
import csv, sys
r = [r for r in csv.DictReader(open(sys.argv[1])) if r.get('train/samples', '') != '']
sys.exit(0 if r and float(r[0]['train/samples']) == 16 else 1)
PY
    run e_bsf --data "csv:$W/tiny.csv" "${COMMON[@]}" --epochs 1 --tuner.init_val 4
    expect_usage e_bsf $? "tuner.init_val is set but tuner.scale_batch_size is null"
    # --no-decay: a parameter group without weight decay (HF's recipe). AdamW with a huge decay
    # (1 - lr*wd = 0.9 a step) shrinks every decayed weight by 0.9^3 in 3 steps: the LayerNorm
    # weights (1 at init) stay near 1 only when the group reached the optimizer; the checkpoint
    # records the groups (24 of the tiny model's 40 parameters: 19 biases, 5 LayerNorm weights).
    ND=(--data "csv:$W/tiny.csv" "${COMMON[@]}" --epochs 1 --limit-train-batches 3 --limit-val-batches 1
        --limit-test-batches 1 --optimizer adamw --weight-decay 100)
    NDP='*.bias,*LayerNorm.weight,*layer_norm.weight'
    "$APP" "${ND[@]}" --no-decay "$NDP" --print-config >"$W/nd_config.json" 2>&1 &&
        grep -qF "\"no_decay\":	\"$NDP\"" "$W/nd_config.json" || { cat "$W/nd_config.json"; die "--print-config lacks no_decay"; }
    run nd "${ND[@]}" --root "$W/runs_nd" --no-decay "$NDP" --export-full "$W/nd.safetensors"; expect_ok nd $?
    run nd0 "${ND[@]}" --root "$W/runs_nd0" --export-full "$W/nd0.safetensors"; expect_ok nd0 $?
    groups=$("$CHECK" meta "$W/runs_nd/checkpoints/csv-tiny/last.safetensors" volt.optimizer.groups) || die "nd: no groups recorded"
    [[ $groups == *'"params":"'"$NDP"'","lr":0.001,"weight_decay":0,"n_params":24}'* && $groups == *'"n_params":16'* ]] ||
        die "nd: the checkpoint's groups are '$groups'"
    python3 - "$W/nd.safetensors" "$W/nd0.safetensors" <<'PY' || die "--no-decay: LayerNorm weights were decayed (or the decay did nothing)"
import json, struct, sys
def load(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h, d, out = json.loads(b[8:8 + n]), b[8 + n:], {}
    for k, v in h.items():
        if k != '__metadata__' and v['dtype'] == 'F32':
            s, e = v['data_offsets']
            out[k] = struct.unpack('<%df' % ((e - s) // 4), d[s:e])
    return out
nd, d0 = load(sys.argv[1]), load(sys.argv[2])
ln = [k for k in nd if k.endswith('LayerNorm.weight') or k.endswith('layer_norm.weight')]
near1 = all(abs(x - 1) < 0.02 for k in ln for x in nd[k])
decayed = all(x < 0.8 for k in ln for x in d0[k])
print('no_decay: %d LayerNorm weights near 1: %s; without it decayed below 0.8: %s' % (len(ln), near1, decayed))
sys.exit(0 if len(ln) == 5 and near1 and decayed else 1)
PY
    # --throughput: the ThroughputMonitor with the app's items (non-padding tokens) and FLOPs
    # (volt_distilbert_flops): in metrics.csv, a window of 2 batch ends holds one batch's FLOPs,
    # so flops/s over batches/s is the tiny model's training FLOPs for a batch of 4 x 16
    # (7104000), mfu is flops/s over the 1 TFLOP/s given, and the tokens counted are fewer than
    # the padded 16 per text but at least one per text.
    run tput --data "csv:$W/tiny.csv" "${COMMON[@]}" --root "$W/runs_tput" --epochs 1 --limit-train-batches 4 \
        --limit-val-batches 3 --limit-test-batches 3 --throughput.window_size 2 --throughput.peak_tflops 1 \
        --trainer.log_every_n_steps 2 --device_stats.cpu_stats true; expect_ok tput $?
    python3 - "$W/runs_tput/lightning_logs/version_0/metrics.csv" <<'PY' || die "tput: the throughput metrics in metrics.csv"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def rows_with(k): return [r for r in rows if r.get(k, '') != '']
ok = True
def want(cond, what):
    global ok
    if not cond: print('tput:', what); ok = False
tr = rows_with('train/device/flops_per_sec')
want([int(r['step']) for r in tr] == [1, 3], 'train rates at steps %s, want 1, 3' % [r['step'] for r in tr])
for r in tr:
    f, b = float(r['train/device/flops_per_sec']), float(r['train/device/batches_per_sec'])
    want(abs(f / b - 7104000) <= 1e-6 * 7104000, 'flops per batch %g' % (f / b))
    want(abs(float(r['train/device/mfu']) - f / 1e12) <= 1e-9 * f / 1e12, 'mfu %s' % r['train/device/mfu'])
    n, l = float(r['train/samples']), float(r['train/lengths'])
    want(n <= l < 16 * n, 'train: %g tokens for %g texts' % (l, n))
    want(abs(float(r['train/device/samples_per_sec']) - 4 * b) <= 1e-9 * 4 * b, 'samples/s = 4 x batches/s')
# validate and test: the split's 6 texts in batches of 4 and 2; the window's FLOPs are the
# last batch's forward (2 x 16: 1184000)
for st in ('validate', 'test'):
    r = rows_with(st + '/batches')
    want(len(r) == 1 and float(r[0][st + '/batches']) == 2 and float(r[0][st + '/samples']) == 6, st + ' totals')
    if len(r) != 1: continue
    f, b = float(r[0][st + '/device/flops_per_sec']), float(r[0][st + '/device/batches_per_sec'])
    want(abs(f / b - 1184000) <= 1e-6 * 1184000, '%s: forward flops per batch %g' % (st, f / b))
    n, l = float(r[0][st + '/samples']), float(r[0][st + '/lengths'])
    want(n <= l < 16 * n, '%s: %g tokens for %g texts' % (st, l, n))
# --device_stats.cpu_stats true (turns the DeviceStatsMonitor on): the host's three stats
# before and after the steps with rows (2 and 4: step column 1, 3), in 0..100
for h in ('start', 'end'):
    for k in ('cpu_percent', 'cpu_vm_percent', 'cpu_swap_percent'):
        c = 'DeviceStatsMonitor.on_train_batch_%s/%s' % (h, k)
        d = rows_with(c)
        want([r['step'] for r in d] == ['1', '3'] and all(0 <= float(r[c]) <= 100 for r in d), '%s at %s' % (c, [r['step'] for r in d]))
sys.exit(0 if ok else 1)
PY
    # An aclImdb/ folder (given by its parent); the recipe's 35k/5k/10k split needs --split here.
    for d in train/pos train/neg test/pos test/neg; do
        mkdir -p "$W/imdb/aclImdb/$d"
        for i in 0 1 2 3 4; do
            if [[ $d == */pos ]]; then w=${POS[$i]}; else w=${NEG[$i]}; fi
            echo "the ${NOUN[$((i % 4))]} was $w.<br /><br />really $w." >"$W/imdb/aclImdb/$d/${i}_$((i + 1)).txt"
        done
    done
    run imdb_default --data "imdb:$W/imdb" "${COMMON[@]}"; expect_err imdb_default $? "needs 50000 texts"
    run imdb --data "imdb:$W/imdb" "${COMMON[@]}" --epochs 1 --split 12,4,4; expect_ok imdb $?
    # --pretrained: the DistilBERT parity fixture (tiny dims, 3 classes) as a HF folder; its
    # vocab.txt is picked up when --vocab is not given.
    mkdir -p "$W/pre"
    cp "$(dirname "$0")/fixtures/distilbert_tiny.safetensors" "$W/pre/model.safetensors" || die "no fixture"
    cp "$W/vocab.txt" "$W/pre/vocab.txt"
    awk -F, 'NR == 1 { print; next } { sub(/,[01]$/, "," (NR % 3)); print }' "$W/tiny.csv" >"$W/three.csv"
    PRE=(--model-preset tiny --max-length 16 --batch-size 4 --cache-dir "$W/cache" --root "$W/runs"
         --no-progress --workers 0 --pretrained "$W/pre")
    run pre --data "csv:$W/three.csv" "${PRE[@]}" --epochs 1 --limit-train-batches 2; expect_ok pre $?
    grep -q '3 classes' "$W/pre.log" || die "pre: the 3-class CSV was not read as 3 classes"
    run pre_2class --data "csv:$W/tiny.csv" "${PRE[@]}" --epochs 1
    expect_err pre_2class $? "classifier.weight.*shape"
    # --export-hf: a Hugging Face folder that --pretrained reads back whole: the weights (no part
    # newly initialised), the vocab (--vocab not given) and the shape; lr 1e-12 keeps the weights,
    # so the test accuracy is the export's (1.0, where a fresh head scores ~0.5); refused names
    run hfx --data "csv:$W/tiny.csv" "${COMMON[@]}" --root "$W/runs_hfx" --lr 3e-3 --epochs 6 --export-hf "$W/hfx"
    expect_ok hfx $?
    for f in model.safetensors config.json vocab.txt tokenizer_config.json; do [[ -s $W/hfx/$f ]] || die "hfx: no $f in the folder"; done
    grep -q '"architectures":.*"DistilBertForSequenceClassification"' "$W/hfx/config.json" || die "hfx: config.json: $(cat "$W/hfx/config.json")"
    run hfx2 --data "csv:$W/tiny.csv" --model-preset tiny --max-length 16 --batch-size 4 --cache-dir "$W/cache" --root "$W/runs_hfx2" \
        --no-progress --workers 0 --epochs 1 --lr 1e-12 --pretrained "$W/hfx"
    expect_ok hfx2 $?
    ! grep -q "newly initialised" "$W/hfx2.log" || die "hfx2: part of the model was not in the export: $(cat "$W/hfx2.log")"
    [[ $(sed -n 's/^Test accuracy //p' "$W/hfx.log") == 1.0000 && $(sed -n 's/^Test accuracy //p' "$W/hfx2.log") == 1.0000 ]] ||
        die "hfx: test accuracy $(sed -n 's/^Test accuracy //p' "$W/hfx.log"), from the folder $(sed -n 's/^Test accuracy //p' "$W/hfx2.log")"
    run hfx_file --data "csv:$W/tiny.csv" "${COMMON[@]}" --epochs 1 --export-hf "$W/tiny.csv"
    expect_usage hfx_file $? "export-hf .*there is a file of that name"
    ln -sfn "$W/nowhere" "$W/hfx_dangling"   # mkdir would fail on it after the whole fit
    run hfx_link --data "csv:$W/tiny.csv" "${COMMON[@]}" --epochs 1 --export-hf "$W/hfx_dangling"
    expect_usage hfx_link $? "export-hf .*a link to nothing"
    run hfx_nodir --data "csv:$W/tiny.csv" "${COMMON[@]}" --epochs 1 --export-hf "$W/no/hfx"
    expect_usage hfx_nodir $? "export-hf .*its folder '.*/no' does not exist"
    run xfull_slash --data "csv:$W/tiny.csv" "${COMMON[@]}" --epochs 1 --export_full "$W/nothere/"
    expect_usage xfull_slash $? "export_full .*is a folder"
    run hfx_val validate --data "csv:$W/tiny.csv" "${COMMON[@]}" --ckpt_path last --export-hf "$W/hfx3"
    expect_usage hfx_val $? "export-hf .*written after a test"
    # BackboneFinetuning from the command line: the backbone frozen in epoch 0 (the summary's
    # trainable count), unfrozen at epoch 1 into an lr group of its own (a column of its own in
    # metrics.csv); a pattern matching no parameter fails the fit, naming it
    BF=()
    for a in "${COMMON[@]}"; do [[ $a == "$W/runs" ]] && BF+=("$W/runs_bf") || BF+=("$a"); done
    BF+=(--data "csv:$W/tiny.csv" --epochs 2 --limit-train-batches 3 --limit-val-batches 2 --limit-test-batches 2
         --trainer.log_every_n_steps 1)
    run bf "${BF[@]}" --finetuning.backbone 'distilbert.*' --finetuning.unfreeze_backbone_at_epoch 1 --finetuning.verbose
    expect_ok bf $?
    grep -Eq '^1\.1 K +Trainable params' "$W/bf.log" || { cat "$W/bf.log"; die "bf: the summary does not show the backbone frozen"; }
    grep -q '^BackboneFinetuning: epoch 1: 36 backbone parameters unfrozen; current lr: 0.001' "$W/bf.log" ||
        { cat "$W/bf.log"; die "bf: the backbone was not unfrozen at epoch 1"; }
    head -1 "$W/runs_bf/lightning_logs/version_0/metrics.csv" | grep -q 'lr-Adam/pg2' || die "bf: no lr column of the backbone's group"
    # EarlyStopping from the command line: a threshold any accuracy passes stops fit at the
    # first validation (one epoch of the two); another early_stopping key alone is an error
    ES=()
    for a in "${BF[@]}"; do [[ $a == "$W/runs_bf" ]] && ES+=("$W/runs_es") || ES+=("$a"); done
    run es "${ES[@]}" --early_stopping.monitor val_acc --early_stopping.mode max --early_stopping.stopping_threshold -1
    expect_ok es $?
    grep -q '^EarlyStopping: Stopping threshold reached: val_acc = .* > -1. Signaling Trainer to stop.' "$W/es.log" ||
        { cat "$W/es.log"; die "es: no stop at the threshold"; }
    step=$("$CHECK" meta "$W/runs_es/checkpoints/csv-tiny/last.safetensors" volt.global_step) || die "es: no last checkpoint"
    [[ $step == 3 ]] || die "es: trained to global_step $step after the stop at the first validation (3)"
    run es_alone "${ES[@]}" --early_stopping.patience 2
    expect_err es_alone $? "early_stopping.patience is set but early_stopping.monitor is not"
    run bf_typo "${BF[@]}" --finetuning.backbone 'bert.*'
    expect_err bf_typo $? "backbone pattern 'bert\.\*' matches no parameter"
    # SpikeDetection from the command line: mode max with no tolerance makes any fall of the loss
    # after the first batch a spike: the fit ends with the batch named, the skip list under the
    # root, and OnExceptionCheckpoint's file to resume from
    run spike "${BF[@]}" --spike_detection.mode max --spike_detection.rtol 0
    expect_err spike $? "fit failed \(numeric error\): SpikeDetection.on_train_batch_end: Training spike detected in batch [0-9]+ of epoch"
    python3 -c 'import json,sys; b=json.load(open(sys.argv[1])); assert len(b) == 2 and b[1] == b[0] + 1, b' \
        "$W/runs_bf/skip_batches.json" || die "spike: skip_batches.json: $(cat "$W/runs_bf/skip_batches.json")"
    grep -q 'OnExceptionCheckpoint: saved' "$W/spike.log" || { cat "$W/spike.log"; die "spike: no on_exception checkpoint"; }
    grep -A1 'Test accuracy' "$W/csv.log"
    ;;
errors)
    run help --help; [[ $? == 0 ]] && grep -q -- '--limit-test-batches' "$W/help.log" || die "--help"
    run e_flag --bogus; expect_usage e_flag $? "unknown option '--bogus'"
    run e_value --lr nope; expect_usage e_value $? "bad value 'nope' for --lr"
    run e_split --split 1,2; expect_usage e_split $? "bad value '1,2' for --split"
    run e_preset --model-preset huge; expect_usage e_preset $? "bad value 'huge' for --model-preset"
    run e_data --data xml:foo; expect_usage e_data $? "expected imdb:DIR, csv:PATH, tsv:PATH or spam"
    run e_spam --data "spam:$W/nowhere" "${COMMON[@]}"; expect_err e_spam $? "scripts/fetch_spam.sh"
    run e_csv --data "csv:$W/missing.csv" "${COMMON[@]}"; expect_err e_csv $? "not found"
    # a FIFO, a device: "is not a regular file" (not "not found"); a folder: "is a directory"
    mkfifo "$W/fifo.csv" || die "mkfifo"
    run e_fifo --data "csv:$W/fifo.csv" "${COMMON[@]}"; expect_err e_fifo $? "csv file '.*/fifo.csv' is not a regular file"
    run e_dir --data "csv:$W" "${COMMON[@]}"; expect_err e_dir $? "csv file '.*' is a directory"
    run e_devvocab --data "csv:$W/tiny.csv" --vocab /dev/null --model-preset tiny --max-length 16
    expect_err e_devvocab $? "vocab '/dev/null' is not a regular file"
    # the class count is 1 + the largest label: one stray label (5000000, 2e9) is refused naming
    # it, before a head of millions of rows is built; so are labels that leave a class without
    # a text (1-based labels, gaps) unless --model.num_classes is given; and a label past a
    # given --model.num_classes
    relabel() {   # relabel OUT AWK-EXPR: tiny.csv with each row's label set to EXPR (of i, the row from 0)
        awk -F, -v OFS=, "NR == 1 { print; next } { i = NR - 2; \$NF = $2; print }" "$W/tiny.csv" >"$1"
    }
    relabel "$W/huge.csv" '(i % 2 ? 5000000 : 0)'
    run e_huge --data "csv:$W/huge.csv" "${COMMON[@]}" --epochs 1
    expect_err e_huge $? "label 5000000 \(first on the text \"the film was very great, really good\.\"\) makes 5000001 classes, more than the 1048576 a model may have: relabel the classes 0\.\.K-1"
    relabel "$W/huge2.csv" '(i % 2 ? 2000000000 : 0)'
    run e_huge2 --data "csv:$W/huge2.csv" "${COMMON[@]}" --epochs 1 --model.num_classes 2
    expect_err e_huge2 $? "label 2000000000 .* is out of range for --model.num_classes 2 \(labels 0\.\.1\)"
    relabel "$W/gap.csv" '(i % 3 == 2 ? 3 : i % 3)'
    run e_gap --data "csv:$W/gap.csv" "${COMMON[@]}" --epochs 1
    expect_err e_gap $? "the largest label is 3 .*, so 4 classes, but 1 of them has no text \(label 2 is the first\): relabel the classes 0\.\.K-1, or set --model.num_classes 4"
    relabel "$W/onebased.csv" '(i % 2 + 1)'
    run e_onebased --data "csv:$W/onebased.csv" "${COMMON[@]}" --epochs 1
    expect_err e_onebased $? "so 3 classes, but 1 of them has no text \(label 0 is the first\)"
    ! grep -q "texts, .* classes" "$W/e_huge.log" "$W/e_gap.log" || die "a refused label set went on to the model"
    run gap_ok --data "csv:$W/gap.csv" "${COMMON[@]}" --root "$W/runs_gap" --epochs 1 --limit-train-batches 1 \
        --limit-val-batches 1 --limit-test-batches 1 --model.num_classes 4
    expect_ok gap_ok $?
    grep -q "texts, 4 classes" "$W/gap_ok.log" || die "gap_ok: not 4 classes: $(cat "$W/gap_ok.log")"
    run e_vocab --data "csv:$W/tiny.csv" --vocab "$W/missing.txt" --model-preset tiny --max-length 16
    expect_err e_vocab $? "vocab '.*missing.txt' not found"
    printf '%s\n' '[PAD]' '[UNK]' movie >"$W/bad_vocab.txt"
    run e_badvocab --data "csv:$W/tiny.csv" --vocab "$W/bad_vocab.txt" --model-preset tiny --max-length 16
    expect_err e_badvocab $? "bad vocab"
    run e_len --data "csv:$W/tiny.csv" "${COMMON[@]}" --max-length 64; expect_usage e_len $? "exceeds the tiny model's 16 positions"
    run e_tput --data "csv:$W/tiny.csv" "${COMMON[@]}" --throughput.window_size 1; expect_usage e_tput $? "throughput.window_size"
    run e_nd_wd --data "csv:$W/tiny.csv" "${COMMON[@]}" --no-decay '*.bias'
    expect_usage e_nd_wd $? "needs --weight-decay > 0: without weight decay it changes nothing"
    run e_nd_typo --data "csv:$W/tiny.csv" "${COMMON[@]}" --epochs 1 --weight-decay 0.01 --no-decay 'bias'
    expect_err e_nd_typo $? "pattern 'bias' matches no parameter .*'\*bias' for a suffix"
    run e_big --data "csv:$W/tiny.csv" "${COMMON[@]}" --split 50,10,10; expect_err e_big $? "needs 70 texts"
    printf 'text,label\n"unterminated,1\n' >"$W/bad.csv"
    run e_badcsv --data "csv:$W/bad.csv" "${COMMON[@]}"; expect_err e_badcsv $? "bad.csv"
    # a checkpoint folder that cannot be written (under a regular file: root cannot write it
    # either), the logger off (its folder would fail first): refused before the first batch, so
    # the progress bar (on here) never shows an epoch, and OnExceptionCheckpoint does not try
    echo 'a file' >"$W/afile"
    run e_ckdir --data "csv:$W/tiny.csv" --vocab "$W/vocab.txt" --model-preset tiny --max-length 16 --batch-size 4 \
        --cache-dir "$W/cache" --workers 0 --epochs 1 --limit-train-batches 3 --limit-val-batches 2 --root "$W/afile/runs" \
        --trainer.enable_logger false
    expect_err e_ckdir $? "ModelCheckpoint: cannot write to dirpath '.*/afile/runs/checkpoints/csv-tiny': .*Not a directory \(checked at fit start\)"
    ! grep -Eq '^(Epoch 0|Validation)|OnExceptionCheckpoint: could not save' "$W/e_ckdir.log" ||
        { cat "$W/e_ckdir.log"; die "e_ckdir: it trained (or tried to save) before refusing the folder"; }
    ;;
accents)
    # Hugging Face's BertTokenizer: strip_accents None strips exactly when lowercasing; the
    # tokenizer_config.json of a --pretrained folder may say either; --data.strip_accents wins.
    # Which of the four spellings "Café" became is read from the token cache (ids i32 [n*L] after
    # the 80-byte header; L at byte 20, n at byte 24).
    printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]' Cafe 'Café' cafe 'café' good bad fine >"$W/cvocab.txt"
    { echo 'text,label'; for i in $(seq 0 59); do w=(good bad fine); echo "Café ${w[$((i % 3))]},$((i % 3))"; done; } >"$W/cafe.csv"
    mkdir -p "$W/pre"
    cp "$(dirname "$0")/fixtures/distilbert_tiny.safetensors" "$W/pre/model.safetensors" || die "no fixture"
    cp "$W/cvocab.txt" "$W/pre/vocab.txt"
    A=(--data "csv:$W/cafe.csv" --model-preset tiny --max-length 8 --batch-size 4 --no-progress --workers 0 --epochs 1
       --limit-train-batches 1 --limit-val-batches 1 --limit-test-batches 1)
    # became NAME WANT args...: a run (its own cache) whose tokens hold WANT and no other spelling
    became() {
        local name=$1 want=$2 rc; shift 2
        run "$name" "${A[@]}" --root "$W/runs_$name" --cache-dir "$W/cache_$name" "$@"
        rc=$?
        expect_ok "$name" $rc
        python3 - "$W/cache_$name" "$want" <<'PY' || die "$name: 'Café' did not become '$want'"
import glob, struct, sys
vocab = open(sys.argv[1] + '/../cvocab.txt', encoding='utf-8').read().split('\n')
ids = set()
for f in glob.glob(sys.argv[1] + '/*.vtok'):
    b = open(f, 'rb').read()
    L, n = struct.unpack_from('<iq', b, 20)
    ids.update(struct.unpack_from('<%di' % (n * L), b, 80))
forms = {vocab.index(w): w for w in ('Cafe', 'Café', 'cafe', 'café')}
got = sorted(forms[i] for i in ids if i in forms)
print('%s: %s' % (sys.argv[2], got))
sys.exit(0 if got == [sys.argv[2]] else 1)
PY
    }
    became lower cafe --vocab "$W/cvocab.txt"                                  # the default: lowercase, strip
    became cased 'Café' --vocab "$W/cvocab.txt" --data.lowercase false          # cased: accents kept
    became cased_strip Cafe --vocab "$W/cvocab.txt" --data.lowercase false --data.strip_accents true \
        --export-hf "$W/hf_cased_strip"
    became lower_keep 'café' --vocab "$W/cvocab.txt" --data.strip_accents false --export-hf "$W/hf_lower_keep"
    # tokenizer_config.json: do_lower_case false alone keeps accents (strip_accents absent or null)
    echo '{"do_lower_case": false}' >"$W/pre/tokenizer_config.json"
    became pre_cased 'Café' --pretrained "$W/pre"
    echo '{"do_lower_case": false, "strip_accents": true}' >"$W/pre/tokenizer_config.json"
    became pre_cased_strip Cafe --pretrained "$W/pre"
    echo '{"do_lower_case": false, "strip_accents": null}' >"$W/pre/tokenizer_config.json"
    became pre_null_lower cafe --pretrained "$W/pre" --data.lowercase true        # null follows the lowercase given
    became pre_flag 'Café' --pretrained "$W/pre" --data.strip_accents false
    echo '{"do_lower_case": true, "strip_accents": "yes"}' >"$W/pre/tokenizer_config.json"
    run pre_bad "${A[@]}" --pretrained "$W/pre" --root "$W/runs_bad"
    expect_err pre_bad $? "tokenizer_config.json': \"strip_accents\" must be true, false or null"
    # --export-hf writes what was used: an explicit value as given, else null (follow do_lower_case)
    python3 - "$W/hf_cased_strip/tokenizer_config.json" "$W/hf_lower_keep/tokenizer_config.json" <<'PY' || die "--export-hf: tokenizer_config.json"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
print(a, b)
sys.exit(0 if a['do_lower_case'] is False and a['strip_accents'] is True and b['do_lower_case'] is True and
         b['strip_accents'] is False else 1)
PY
    became hf_back Cafe --pretrained "$W/hf_cased_strip"                          # read back whole
    run hf_null "${A[@]}" --vocab "$W/cvocab.txt" --root "$W/runs_hf_null" --cache-dir "$W/cache_hf_null" --export-hf "$W/hf_null"
    expect_ok hf_null $?
    python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); sys.exit(0 if t["do_lower_case"] is True and "strip_accents" in t and t["strip_accents"] is None else 1)' \
        "$W/hf_null/tokenizer_config.json" || die "--export-hf: strip_accents not null by default: $(cat "$W/hf_null/tokenizer_config.json")"
    ;;
fingerprint)
    [[ -n $CHECK ]] || die "fingerprint needs APP_CHECK"
    mkdir -p "$W/d1" "$W/pre" && ln -s d1 "$W/link" || die "mkdir"
    cp "$W/tiny.csv" "$W/d1/tiny.csv"
    cp "$(dirname "$0")/fixtures/distilbert_tiny.safetensors" "$W/pre/model.safetensors" || die "no fixture"
    cp "$W/vocab.txt" "$W/pre/vocab.txt"
    awk -F, 'NR == 1 { print; next } { sub(/,[01]$/, "," (NR % 3)); print }' "$W/tiny.csv" >"$W/d1/three.csv"
    FP=(--model-preset tiny --max-length 16 --batch-size 4 --lr 1e-3 --cache-dir "$W/cache" --no-progress --workers 0 --limit-train-batches 2 --limit-val-batches 1 --limit-test-batches 1)
    resumed() {   # LOGNAME RC ROOT STEP: exit 0 and ROOT's last checkpoint at global_step STEP (resumed, not afresh)
        local log=$1 rc=$2 last=$3/checkpoints/csv-tiny/last.safetensors want=$4 step
        expect_ok "$log" "$rc"
        step=$("$CHECK" meta "$last" volt.global_step) || die "$log: no global_step"
        [[ $step == "$want" ]] || { cat "$W/$log.log"; die "$log: last checkpoint at global_step $step, want $want (resumed)"; }
    }
    # epoch 1 with the paths relative to d1; epoch 2 by absolute paths through a symlink
    (cd "$W/d1" && "$APP" --data csv:tiny.csv --vocab ../vocab.txt "${FP[@]}" --root "$W/runs" --epochs 1 >"$W/fp1.log" 2>&1)
    expect_ok fp1 $?
    run fp2 --data "csv:$W/link/tiny.csv" --vocab "$W/vocab.txt" "${FP[@]}" --root "$W/runs" --epochs 2 --resume
    resumed fp2 $? "$W/runs" 4
    # the same path, other content (one label flipped): refused, naming the data
    sed -i '2s/,0$/,1/' "$W/d1/tiny.csv"
    run fp3 --data "csv:$W/link/tiny.csv" --vocab "$W/vocab.txt" "${FP[@]}" --root "$W/runs" --epochs 3 --resume
    expect_err fp3 $? "comes from a run with other data or model settings: data_hash: "
    cp "$W/runs/checkpoints/csv-tiny/last.safetensors" "$W/plain.safetensors"   # fp2's (step 4), for the old form below
    # --pretrained (its vocab.txt picked up): relative, then through '..'; then other weights
    (cd "$W" && "$APP" --data csv:d1/three.csv --pretrained pre "${FP[@]}" --root "$W/runs_pre" --epochs 1 >"$W/fp4.log" 2>&1)
    expect_ok fp4 $?
    run fp5 --data "csv:$W/link/../d1/three.csv" --pretrained "$W/link/../pre" "${FP[@]}" --root "$W/runs_pre" --epochs 2 \
        --resume
    resumed fp5 $? "$W/runs_pre" 4
    python3 - "$W/pre/model.safetensors" <<'PY' || die "cannot change the weights"
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[-4] ^= 1    # the last f32's lowest mantissa bit: other weights, the same names, shapes and size
open(sys.argv[1], 'wb').write(b)
PY
    run fp6 --data "csv:$W/d1/three.csv" --pretrained "$W/pre" "${FP[@]}" --root "$W/runs_pre" --epochs 3 --resume
    expect_err fp6 $? "comes from a run with other data or model settings: pretrained_hash: "
    # A checkpoint from before fingerprints by content records the paths typed: the same
    # paths resume it (and the run's new checkpoints keep that form); others are refused,
    # naming each path that differs
    python3 - "$W/plain.safetensors" "$W/legacy.safetensors" "data=csv:$W/d1/tiny.csv;split=48,6,6;max_length=16;vocab=$W/vocab.txt;lowercase=1;model=dim32,layers2,heads4,hidden64,vocab30,pos16;classes=2;pretrained=" <<'PY' || die "cannot write the old fingerprint"
import json, struct, sys, zlib
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
m = h['__metadata__']
m['volt.run_fingerprint'] = sys.argv[3]
# the metadata checksum (trainer/checkpoint_meta.c): crc32 of "key\0value\0", keys sorted
c = 0
for k in sorted((k for k in m if k != 'format' and not k.startswith('crc32:') and k != 'volt.meta_crc32'), key=str.encode):
    c = zlib.crc32(k.encode() + b'\0' + m[k].encode() + b'\0', c)
m['volt.meta_crc32'] = '%08x' % c
j = json.dumps(h, separators=(',', ':')).encode()
j += b' ' * (-len(j) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(j)) + j + b[8 + n:])
PY
    cp "$W/tiny.csv" "$W/d1/tiny.csv"
    run fp7 --data "csv:$W/link/tiny.csv" --vocab "$W/vocab.txt" "${FP[@]}" --root "$W/runs" --epochs 3 \
        --ckpt_path "$W/legacy.safetensors"
    expect_err fp7 $? "predates fingerprints by content.*: data: 'csv:$W/d1/tiny.csv' -> 'csv:$W/link/tiny.csv'"
    run fp8 --data "csv:$W/d1/tiny.csv" --vocab "$W/vocab.txt" "${FP[@]}" --root "$W/runs" --epochs 3 \
        --ckpt_path "$W/legacy.safetensors"
    resumed fp8 $? "$W/runs" 6
    fp=$("$CHECK" meta "$W/runs/checkpoints/csv-tiny/last.safetensors" volt.run_fingerprint) || die "fp8: no fingerprint"
    [[ $fp == data=csv:"$W"/d1/tiny.csv\;* ]] || die "fp8: the resumed run's checkpoint records '$fp', want the old form"
    ;;
dist)
    [[ -n $VOLT_RUN && -n $CHECK ]] || die "dist needs VOLT_RUN and APP_CHECK"
    DIST=(--data "csv:$W/tiny.csv" "${COMMON[@]}" --epochs 1 --limit-train-batches 3 --limit-val-batches 2
          --limit-test-batches 2 --memory-report)
    # single at batch 4, ddp and fsdp on 2 ranks at 2 per rank: the same global batch. The
    # dropout masks differ between 1 and 2 ranks (so single is compared by names and shapes)
    # but not between two 2-rank runs: fsdp's weights and losses are compared with ddp's.
    run single "${DIST[@]}" --batch-size 4 --export-full "$W/single.safetensors"; expect_ok single $?
    "$VOLT_RUN" -n 2 "$APP" "${DIST[@]}" --root "$W/runs_ddp" --batch-size 2 --strategy ddp \
        --export-full "$W/ddp.safetensors" >"$W/ddp.log" 2>"$W/ddp.err"
    rc=$?
    [[ $rc == 0 ]] || cat "$W/ddp.err"
    expect_ok ddp $rc
    # ddp again with --checkpoint.async_save (rank 0 writes from a host snapshot in the
    # background): the same tensors in its last checkpoint
    "$VOLT_RUN" -n 2 "$APP" "${DIST[@]}" --root "$W/runs_ddp_async" --batch-size 2 --strategy ddp \
        --checkpoint.async_save >"$W/ddp_async.log" 2>"$W/ddp_async.err"
    rc=$?
    [[ $rc == 0 ]] || cat "$W/ddp_async.err"
    expect_ok ddp_async $rc
    # the batch size finder is one process's: refused under 2, said once, exit 2
    "$VOLT_RUN" -n 2 "$APP" "${DIST[@]}" --root "$W/runs_bsf2" --batch-size 2 --strategy ddp \
        --tuner.scale_batch_size power >"$W/bsf2.log" 2>&1
    rc=$?
    n=$(grep -c 'tuner.scale_batch_size: not supported with distributed strategies (2 processes)' "$W/bsf2.log")
    [[ $rc == 2 && $n == 1 ]] || { cat "$W/bsf2.log"; die "bsf2: exit $rc, the refusal printed $n times (want 2, once)"; }
    "$CHECK" same "$W/runs_ddp/checkpoints/csv-tiny/last.safetensors" \
        "$W/runs_ddp_async/checkpoints/csv-tiny/last.safetensors" ||
        die "ddp with async_save: the last checkpoint differs from ddp's"
    # fsdp shards the state: with async_save every rank writes its shard in the background and
    # the next save point (here fit's end) commits the index; test then loads the best of them
    # (--export-full below holds what it loaded), and nothing is left behind
    "$VOLT_RUN" -n 2 "$APP" "${DIST[@]}" --root "$W/runs_fsdp" --batch-size 2 --strategy fsdp \
        --checkpoint.async_save --export-full "$W/fsdp.safetensors" >"$W/fsdp.log" 2>"$W/fsdp.err"
    rc=$?
    [[ $rc == 0 ]] || cat "$W/fsdp.err"
    expect_ok fsdp $rc
    CKD="$W/runs_fsdp/checkpoints/csv-tiny"
    n_idx=$(find "$CKD" -maxdepth 1 -name '*.safetensors' -type f | wc -l)
    n_dir=$(find "$CKD" -maxdepth 1 -name '*.safetensors.shards-*' -type d | wc -l)
    n_tmp=$(find "$CKD" -name '*.tmp' | wc -l)
    [[ $n_idx -ge 1 && $n_dir == "$n_idx" && $n_tmp == 0 ]] ||
        { ls -laR "$CKD"; die "fsdp with async_save: $n_idx checkpoints, $n_dir shard folders, $n_tmp .tmp"; }
    for pat in '^volt-text-classification: csv ' '^tokenized to 16 tokens' '^model: tiny from scratch, 2 classes, .*batch 2 per rank x 2 ranks = 4 \(fsdp\)' \
               '^Time elapsed ' '^best checkpoint: ' '^Test accuracy ' '^logs: ' '^exported the full weights ' \
               '^after the first optimizer step \(step 1\):$' '^after fit \(step 3\):$'; do
        n=$(grep -cE -- "$pat" "$W/fsdp.log")
        [[ $n == 1 ]] || { cat "$W/fsdp.log"; die "fsdp: '$pat' printed $n times, want once (rank 0 only)"; }
    done
    [[ $(grep -c '^memory report: strategy fsdp, 2 ranks' "$W/fsdp.log") == 2 ]] || { cat "$W/fsdp.log"; die "fsdp: want two memory tables"; }
    "$CHECK" memtable "$W/single.log" 1 2 1 || die "single: memory table"
    "$CHECK" memtable "$W/fsdp.log" 2 2 2 || die "fsdp: memory table"
    "$CHECK" export "$W/single.safetensors" "$W/fsdp.safetensors" -1 || die "fsdp: export"
    "$CHECK" export "$W/ddp.safetensors" "$W/fsdp.safetensors" 1e-5 || die "fsdp: exported weights differ from ddp's"
    "$CHECK" losses "$W/runs_ddp/lightning_logs/version_0/metrics.csv" "$W/runs_fsdp/lightning_logs/version_0/metrics.csv" 1e-5 0 val_loss ||
        die "fsdp: logged validation losses differ from ddp's"
    # predict on 2 ranks (ddp, fsdp): each rank predicts its shard, rank 0 gathers the rows and
    # writes each text once, in input order (5 texts: rank 1's shard wraps around to text 0);
    # the labels are single's and the probabilities agree to the printed digits. stdin under
    # 2 ranks is refused, said once.
    printf 'the movie was very good\nthe plot was awful, really bad.\n\nfine acting\nnot my kind of film\n' >"$W/texts.txt"
    PRED=(--vocab "$W/vocab.txt" --model-preset tiny --max-length 16 --batch-size 2 --cache-dir "$W/cache" --workers 0
          --ckpt_path "$W/runs_ddp/checkpoints/csv-tiny/last.safetensors" --predict.input "$W/texts.txt")
    "$APP" predict "${PRED[@]}" --predict.output "$W/pred1.csv" >"$W/pred1.log" 2>&1 || { cat "$W/pred1.log"; die "predict on one process"; }
    for s in ddp fsdp; do
        "$VOLT_RUN" -n 2 "$APP" predict "${PRED[@]}" --strategy $s --predict.output "$W/pred2_$s.csv" >"$W/pred2_$s.log" 2>&1 ||
            { cat "$W/pred2_$s.log"; die "predict on 2 ranks ($s)"; }
        [[ $(grep -c "^volt-text-classification: 5 predictions written to $W/pred2_$s.csv (every rank's, gathered on rank 0)$" \
              "$W/pred2_$s.log") == 1 ]] || { cat "$W/pred2_$s.log"; die "predict on 2 ranks ($s): the written line"; }
        python3 - "$W/pred1.csv" "$W/pred2_$s.csv" <<'PY' || die "predict on 2 ranks ($s): the rows differ from one process's"
import sys
a, b = (open(f).read().split("\n") for f in sys.argv[1:3])
assert a[0] == b[0] == "index,label,probability" and len(a) == len(b) == 7, (a, b)
for x, y in zip(a[1:6], b[1:6]):
    i, l, p = x.split(","); j, m, q = y.split(",")
    assert i == j and l == m and abs(float(p) - float(q)) <= 2e-6, (x, y)
assert [r.split(",")[0] for r in b[1:6]] == ["0", "1", "2", "3", "4"], b
PY
    done
    "$VOLT_RUN" -n 2 "$APP" predict "${PRED[@]}" --predict.input - --predict.output "$W/pred_stdin.csv" \
        <"$W/texts.txt" >"$W/pred_stdin.log" 2>&1
    rc=$?
    n=$(grep -c "predict.input '-' (stdin) reaches rank 0 alone under 2 ranks" "$W/pred_stdin.log")
    [[ $rc == 1 && $n == 1 && ! -e "$W/pred_stdin.csv" ]] ||
        { cat "$W/pred_stdin.log"; die "predict from stdin on 2 ranks: exit $rc, said $n times (want 1, once, no output)"; }
    # --pretrained under ddp: every rank loads the folder; its notes (a head not in the file:
    # newly initialised; the fixture's extra tensors: unused) are rank 0's alone, as on one
    mkdir -p "$W/pre" && cp "$W/vocab.txt" "$W/pre/vocab.txt"
    python3 - "$(dirname "$0")/fixtures/distilbert_tiny.safetensors" "$W/pre/model.safetensors" <<'PY' || die "no headless fixture"
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h, d, out, data = json.loads(b[8:8 + n]), b[8 + n:], {}, b''
for k, v in h.items():   # the body alone, as distilbert-base-uncased's file
    if k != '__metadata__' and 'classifier' in k: continue
    if k != '__metadata__':
        s, e = v['data_offsets']
        v = dict(v, data_offsets=[len(data), len(data) + e - s])
        data += d[s:e]
    out[k] = v
j = json.dumps(out).encode()
j += b' ' * (-len(j) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(j)) + j + data)
PY
    "$VOLT_RUN" -n 2 "$APP" "${DIST[@]}" --root "$W/runs_pre" --batch-size 2 --strategy ddp --pretrained "$W/pre" \
        >"$W/pre.log" 2>"$W/pre.err"
    rc=$?
    [[ $rc == 0 ]] || cat "$W/pre.err"
    expect_ok pre $rc
    for pat in "^distilbert: '.*': newly initialised \(not in the checkpoint; train them\): pre_classifier.weight" \
               "^distilbert: '.*': unused tensor " "^distilbert: '.*': \.\.\. [0-9]+ unused tensors in all$"; do
        n=$(grep -cE -- "$pat" "$W/pre.err")
        want=1
        [[ $pat == *"unused tensor "* ]] && want=5   # the first five named, then the count
        [[ $n == "$want" ]] || { cat "$W/pre.err"; die "pre: '$pat' printed $n times on 2 ranks, want $want (rank 0 only)"; }
    done
    # an error both ranks agree on (a finetuning pattern that matches nothing, found at fit
    # start on each) is said once, by rank 0, and every rank exits 1
    "$VOLT_RUN" -n 2 "$APP" "${DIST[@]}" --root "$W/runs_agree" --batch-size 2 --strategy ddp \
        --finetuning.backbone 'bert.*' >"$W/agree.log" 2>"$W/agree.err"
    rc=$?
    n=$(grep -c "fit failed (invalid argument): BackboneFinetuning.setup: backbone pattern 'bert.\*' matches no parameter" \
        "$W/agree.err")
    [[ $rc != 0 && $n == 1 ]] || { cat "$W/agree.err"; die "agree: exit $rc, the agreed error printed $n times on 2 ranks, want once"; }
    ;;
*) die "unknown mode '$MODE'" ;;
esac
echo "app_text_classification $MODE: ok"
