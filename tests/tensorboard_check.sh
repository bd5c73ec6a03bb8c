#!/usr/bin/env bash
# TensorBoard event file check (issue 14): run the fashion app for two short epochs with
# log_every_n_steps 5, then read the event file with independent readers: python3 splits the
# TFRecord frames and checks both masked CRC-32C values with its own CRC code, protoc decodes
# every record against the published schema (tests/tensorboard/event.proto), and the decoded
# text must hold the file version, the hparams plugin (naming every trainer setting), the config text and the scalars
# (train_loss per step, train_acc / val_acc per epoch, test_acc) at the steps metrics.csv has.
#   tensorboard_check.sh APP WORKDIR PROTO_DIR
set -uo pipefail
APP=${1:?app}; W=${2:?workdir}; P=${3:?proto dir}
command -v protoc >/dev/null || { echo "SKIP: protoc not installed (scripts/setup.sh installs protobuf-compiler)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
die() { echo "tensorboard_check: FAILED: $*"; exit 1; }
rm -rf "$W" && mkdir -p "$W"
"$APP" fit --epochs 2 --limit-train-batches 10 --limit-val-batches 3 --limit-test-batches 3 --root "$W/runs" \
    --no-progress --trainer.log_every_n_steps 5 >"$W/app.log" 2>&1 || { cat "$W/app.log"; die "app failed"; }
ev=$(ls "$W"/runs/lightning_logs/version_0/events.out.tfevents.* 2>/dev/null | head -1)
[[ -n $ev ]] || die "no events.out.tfevents.* beside metrics.csv"
mkdir -p "$W/rec"
python3 - "$ev" "$W/rec" <<'PY' || die "TFRecord framing"
import struct, sys
def crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82f63b78 if crc & 1 else crc >> 1
    return crc ^ 0xffffffff
def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xa282ead8) & 0xffffffff
assert crc32c(b"123456789") == 0xe3069283
buf = open(sys.argv[1], "rb").read()
i = n = 0
while i < len(buf):
    if i + 12 > len(buf): sys.exit("truncated header at %d" % i)
    ln, = struct.unpack("<Q", buf[i:i + 8]); lc, = struct.unpack("<I", buf[i + 8:i + 12])
    if lc != masked(buf[i:i + 8]): sys.exit("record %d: length crc mismatch" % n)
    data = buf[i + 12:i + 12 + ln]; dc, = struct.unpack("<I", buf[i + 12 + ln:i + 16 + ln])
    if len(data) != ln or dc != masked(data): sys.exit("record %d: data crc mismatch" % n)
    open("%s/%04d.bin" % (sys.argv[2], n), "wb").write(data)
    i += 16 + ln; n += 1
print("records", n)
PY
: >"$W/decoded.txt"
for f in "$W"/rec/*.bin; do
    protoc --proto_path="$P" --decode=tensorboard.Event event.proto <"$f" >>"$W/decoded.txt" 2>"$W/protoc.err" ||
        { cat "$W/protoc.err"; die "protoc cannot decode $(basename "$f")"; }
    echo "----" >>"$W/decoded.txt"
done
D="$W/decoded.txt"
grep -q 'file_version: "brain.Event:2"' "$D" || die "no file_version record"
grep -q 'plugin_name: "hparams"' "$D" && grep -q '_hparams_/session_start_info' "$D" || die "no hparams summary"
# the hparams record names every trainer setting (trainer/config_fields.c), the issue-11/12 ones too
hp=$(awk -v RS='----\n' '/_hparams_\/session_start_info/' "$D")
for k in max_epochs log_every_n_steps precision accelerator optimizer_dtype enable_plots grad_scaler_growth_interval \
         compile matmul_precision strategy_comm strategy_reduce_dtype; do
    grep -q "$k" <<<"$hp" || die "hparams record has no $k"
done
grep -q 'plugin_name: "text"' "$D" && grep -q 'config/text_summary' "$D" && grep -q 'max_epochs' "$D" || die "no config text summary"
# scalars: each (tag, step) pair of metrics.csv appears as a simple_value at that step
python3 - "$D" "$W/runs/lightning_logs/version_0/metrics.csv" <<'PY' || die "scalars do not match metrics.csv"
import csv, re, sys
text = open(sys.argv[1]).read().split("----\n")
tb = set()
for rec in text:
    m = re.search(r"^step: (\d+)", rec, re.M)
    step = int(m.group(1)) if m else 0
    for tag, val in re.findall(r'tag: "([^"]+)"\s+simple_value: ([-0-9.e+]+)', rec):
        tb.add((tag, step, round(float(val), 4)))
rows = list(csv.DictReader(open(sys.argv[2])))
need = 0
for r in rows:
    for k, v in r.items():
        if k in ("epoch", "step") or v == "": continue
        key = (k, int(r["step"]), round(float(v), 4))
        if key not in tb: sys.exit("metrics.csv %s at step %s = %s not in the event file" % (k, r["step"], v))
        need += 1
tags = {t for t, _, _ in tb}
for t in ("train_loss", "train_acc", "val_acc", "val_loss", "test_acc"):
    if t not in tags: sys.exit("no %s scalar" % t)
if sum(1 for t, _, _ in tb if t == "train_loss") < 4: sys.exit("train_loss not logged every 5 steps")
print("scalars", len(tb), "csv values", need)
PY
# the end-of-fit plots beside the logs
for f in loss accuracy; do
    grep -q '<polyline' "$W/runs/lightning_logs/version_0/$f.svg" 2>/dev/null || die "no $f.svg with a line beside metrics.csv"
done
echo "tensorboard_check: ok"
