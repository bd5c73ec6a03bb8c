#!/usr/bin/env bash
# volt-fashion-mnist on the real data, checked by values (registered by tests/fashion.cmake).
#
#   app_fashion.sh resume   APP CHECK WORKDIR
#       three runs: 3 epochs uninterrupted ("full"); 2 epochs, then --resume to 3 ("res").
#       Every run exits 0 and prints its test_acc once; the resumed run continues at the
#       saved step (its first logged train loss is in epoch 2, after step 2 epochs' worth,
#       and no earlier step is logged twice); both runs end at global_step 3 epochs' worth,
#       log the same train loss at every step (the printed values) and leave last
#       checkpoints equal bit for bit (weights, optimizer states); same test_acc; and the
#       model learned (test_acc >= 0.75).
#   app_fashion.sh np2_ref  APP CHECK WORKDIR VOLT_RUN            single, batch 64, 1 epoch
#   app_fashion.sh STRATEGY APP CHECK WORKDIR VOLT_RUN            STRATEGY on 2 ranks, batch 32
#       per rank (the same global batch): exit 0, test_acc once (rank 0), the exported
#       weights within 1e-4 of np2_ref's after 100 steps (no dropout: the masks differ per
#       rank), and test_acc >= 0.75.
#   app_fashion.sh errors   APP CHECK WORKDIR
#       IDX files that are not Fashion-MNIST's (written here, gzip'd: images of 27x28, a label
#       12 or 255; in the training files, then in the test files beside a well-formed 60,000
#       image training set) exit 1 naming the file and what is wrong, before any trainer
#       exists (no run folder, no on_exception checkpoint). Registered by tests/apps.cmake
#       (no real data needed; ~2 s).
# CHECK is tests/tools/app_check.c. Prints "app_fashion <mode>: ok" when all passed, else
# what failed, and exits 1 (ctest reads the exit status).
set -uo pipefail
MODE=${1:?mode}
APP=${2:?app}
CHECK=${3:?app_check}
W=${4:?workdir}
VOLT_RUN=${5:-}
B=100   # train batches per epoch
COMMON=(--model mlp --limit-train-batches $B --limit-val-batches 10 --limit-test-batches 20 --no-progress --workers 0)

die() { echo "app_fashion $MODE: FAILED: $*"; exit 1; }

# run NAME [launcher...] -- args...: output in $W/NAME.log (stdout) and $W/NAME.err; exit 0 wanted
run() {
    local name=$1 rc; shift
    local launch=()
    while [[ $1 != -- ]]; do launch+=("$1"); shift; done
    shift
    "${launch[@]}" "$APP" "$@" >"$W/$name.log" 2>"$W/$name.err"
    rc=$?
    [[ $rc == 0 ]] || { cat "$W/$name.log" "$W/$name.err"; die "$name: exit status $rc"; }
    local n
    n=$(grep -cE '^Test accuracy [01]\.[0-9]{4}$' "$W/$name.log")
    [[ $n == 1 ]] || { cat "$W/$name.log"; die "$name: test_acc printed $n times, want 1"; }
}
acc() { sed -n 's/^Test accuracy //p' "$W/$1.log"; }
learned() { awk -v a="$(acc "$1")" 'BEGIN { exit !(a >= 0.75) }' || die "$1: test_acc $(acc "$1") < 0.75"; }
step_of() { "$CHECK" meta "$1" volt.global_step || die "no volt.global_step in $1"; }

case "$MODE" in
resume)
    rm -rf "$W/resume" && mkdir -p "$W/resume" || exit 1
    W=$W/resume
    run full -- "${COMMON[@]}" --epochs 3 --root "$W/full"
    run part -- "${COMMON[@]}" --epochs 2 --root "$W/res"
    CSV_F=$W/full/lightning_logs/version_0/metrics.csv CSV_R=$W/res/lightning_logs/version_0/metrics.csv
    LAST_F=$W/full/checkpoints/mlp/last.safetensors LAST_R=$W/res/checkpoints/mlp/last.safetensors
    [[ $(step_of "$LAST_R") == $((2 * B)) ]] || die "part: last checkpoint at step $(step_of "$LAST_R"), want $((2 * B))"
    run resume -- "${COMMON[@]}" --epochs 3 --root "$W/res" --resume
    # a resumed run is a run of its own (docs/RELIABILITY.md): it logs into version_1, and
    # its first train loss is in epoch 2, past step 2B
    CSV_R1=$W/res/lightning_logs/version_1/metrics.csv
    [[ -f $CSV_R1 ]] || die "resume: no new version folder (version_1) for the resumed run"
    first=$(tail -n +2 "$CSV_R1" | awk -F, -v h="$(head -1 "$CSV_R1")" '
                BEGIN { n = split(h, c, ","); for (i = 1; i <= n; i++) col[c[i]] = i }
                $col["train_loss"] != "" { print $col["epoch"], $col["step"]; exit }')
    read -r ep st <<<"$first"
    [[ -n $first && $ep == 2 && $st -ge $((2 * B)) && $st -lt $((3 * B)) ]] ||
        { cat "$CSV_R1"; die "resume: first logged train loss at '${first:-none}' (epoch step), want epoch 2 past step $((2 * B))"; }
    echo "resume: continued at epoch $ep, first logged step $st (saved at global_step $((2 * B)))"
    [[ $(step_of "$LAST_F") == $((3 * B)) && $(step_of "$LAST_R") == $((3 * B)) ]] ||
        die "global_step at the end: full $(step_of "$LAST_F"), resumed $(step_of "$LAST_R"), want $((3 * B))"
    "$CHECK" losses "$CSV_F" "$CSV_R+$CSV_R1" 0 || die "train losses per step differ between the full and the resumed run"
    "$CHECK" same "$LAST_F" "$LAST_R" || die "the resumed run's last checkpoint differs from the uninterrupted run's"
    [[ $(acc full) == "$(acc resume)" ]] || die "test_acc: full $(acc full), resumed $(acc resume)"
    learned full
    ;;
np2_ref)
    rm -rf "$W/np2_ref" && mkdir -p "$W/np2_ref" || exit 1
    run np2_ref/single -- "${COMMON[@]}" --epochs 1 --dropout 0 --batch-size 64 --root "$W/np2_ref/root" \
        --export-full "$W/np2_ref/single.safetensors"
    learned np2_ref/single
    ;;
ddp|fsdp|deepspeed_stage_1|deepspeed_stage_2|fsdp_shard_grad_op)
    [[ -n $VOLT_RUN ]] || die "needs VOLT_RUN"
    [[ -f $W/np2_ref/single.safetensors ]] || die "run the np2_ref mode first (ctest fixture app_fashion_np2_ref)"
    rm -rf "${W:?}/$MODE" && mkdir -p "$W/$MODE" || exit 1
    run "$MODE/np2" "$VOLT_RUN" -n 2 -- "${COMMON[@]}" --epochs 1 --dropout 0 --batch-size 32 --strategy "$MODE" \
        --root "$W/$MODE/root" --export-full "$W/$MODE/np2.safetensors"
    grep -q "batch 32 per rank x 2 ranks = 64 ($MODE)" "$W/$MODE/np2.log" || die "the banner does not give the global batch"
    "$CHECK" export "$W/np2_ref/single.safetensors" "$W/$MODE/np2.safetensors" 1e-4 || die "exported weights differ from single's"
    learned "$MODE/np2"
    ;;
errors)
    rm -rf "$W/errors" && mkdir -p "$W/errors" || exit 1
    W=$W/errors
    # idx DIR PREFIX N ROWS COLS BADLABEL: DIR/PREFIX-{images-idx3,labels-idx1}-ubyte.gz, N blank
    # images of ROWS x COLS, labels i % 10 with item 3's set to BADLABEL (-1: none)
    idx() {
        python3 - "$@" <<'PY'
import gzip, struct, sys
d, pre, n, rows, cols, bad = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
with gzip.open('%s/%s-images-idx3-ubyte.gz' % (d, pre), 'wb', compresslevel=1) as f:
    f.write(struct.pack('>IIII', 0x803, n, rows, cols) + bytes(n * rows * cols))
lab = bytearray(i % 10 for i in range(n))
if bad >= 0: lab[3] = bad
with gzip.open('%s/%s-labels-idx1-ubyte.gz' % (d, pre), 'wb', compresslevel=1) as f:
    f.write(struct.pack('>II', 0x801, n) + bytes(lab))
PY
    }
    # refused NAME PATTERN: exit 1, the message, and nothing made under the root
    refused() {
        local name=$1 pat=$2 rc
        "$APP" --data "$W/$name" --epochs 1 --root "$W/$name/runs" --no-progress --workers 0 >"$W/$name.log" 2>&1
        rc=$?
        [[ $rc == 1 ]] && grep -Eq -- "$pat" "$W/$name.log" || { cat "$W/$name.log"; die "$name: exit $rc, want 1 and '$pat'"; }
        [[ ! -e $W/$name/runs ]] || { ls -R "$W/$name/runs"; die "$name: a run folder was made before the data was checked"; }
    }
    mkdir -p "$W/dims" "$W/labels" "$W/t_dims" "$W/t_labels" || exit 1
    idx "$W/dims" train 20 27 28 -1 && idx "$W/dims" t10k 10 28 28 -1 || die "cannot write the IDX files"
    refused dims "'$W/dims/train-images-idx3-ubyte.gz' holds images of 756 pixels, want 28x28 \(784\)"
    idx "$W/labels" train 20 28 28 12 && idx "$W/labels" t10k 10 28 28 -1 || die "cannot write the IDX files"
    refused labels "'$W/labels/train-labels-idx1-ubyte.gz': label 12 of item 3 is not a class of Fashion-MNIST \(want 0..9\)"
    # the test files, beside a training set the app takes (60,000 blank images)
    idx "$W/t_dims" train 60000 28 28 -1 && idx "$W/t_dims" t10k 10 27 28 -1 || die "cannot write the IDX files"
    refused t_dims "'$W/t_dims/t10k-images-idx3-ubyte.gz' holds images of 756 pixels"
    cp "$W/t_dims"/train-* "$W/t_labels/" && idx "$W/t_labels" t10k 10 28 28 255 || die "cannot write the IDX files"
    refused t_labels "'$W/t_labels/t10k-labels-idx1-ubyte.gz': label 255 of item 3 is not a class"
    ;;
*) die "unknown mode '$MODE'" ;;
esac
echo "app_fashion $MODE: ok"
