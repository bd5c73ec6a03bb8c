#!/usr/bin/env bash
# volt-plot check (issue 14): draw a known metrics.csv, render loss.svg with rsvg-convert
# (librsvg, an independent SVG renderer) and check the PNG: its size, and that the train
# and val series' colours cover enough pixels in the plot area where their values are.
# Also: bad input exits with a message, usage errors exit 2.
#   plot_check.sh VOLT_PLOT WORKDIR
set -uo pipefail
PLOT=${1:?volt-plot}; W=${2:?workdir}
command -v rsvg-convert >/dev/null || { echo "SKIP: rsvg-convert not installed (scripts/setup.sh installs librsvg2-bin)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
die() { echo "plot_check: FAILED: $*"; exit 1; }
rm -rf "$W" && mkdir -p "$W"
python3 - "$W/metrics.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("epoch,step,train_loss,val_loss,val_acc,train_acc\n")
    for s in range(50):
        e = s // 10
        f.write("%d,%d,%r,,,\n" % (e, s, 2.0 * 0.95 ** s))
        if s % 10 == 9:
            f.write("%d,%d,,%r,%r,%r\n" % (e, s, 1.8 * 0.9 ** e, 0.5 + 0.08 * e, 0.45 + 0.09 * e))
PY
"$PLOT" "$W/metrics.csv" >"$W/plot.log" 2>&1 || { cat "$W/plot.log"; die "volt-plot failed"; }
[[ -s $W/loss.svg && -s $W/accuracy.svg ]] || die "no loss.svg / accuracy.svg next to the CSV"
rsvg-convert -f png -o "$W/loss.png" "$W/loss.svg" || die "rsvg-convert cannot render loss.svg"
python3 - "$W/loss.png" <<'PY' || die "the rendered plot is wrong"
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
i, idat, w = 8, b"", 0
while i < len(b):
    n, = struct.unpack(">I", b[i:i + 4]); typ = b[i + 4:i + 8]; data = b[i + 8:i + 8 + n]
    if typ == b"IHDR": w, h, depth, ctype = struct.unpack(">IIBB", data[:10])
    if typ == b"IDAT": idat += data
    i += 12 + n
assert (w, h) == (720, 440), "size %dx%d, want 720x440" % (w, h)
assert depth == 8 and ctype in (2, 6), "unexpected PNG format"
bpp = 4 if ctype == 6 else 3
raw = zlib.decompress(idat); stride = w * bpp; rows = []; prev = bytearray(stride); p = 0
for y in range(h):
    f = raw[p]; line = bytearray(raw[p + 1:p + 1 + stride]); p += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0; up = prev[x]; c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + up) & 255
        elif f == 3: line[x] = (line[x] + (a + up) // 2) & 255
        elif f == 4:
            pa, pb, pc = abs(up - c), abs(a - c), abs(a + up - 2 * c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else up if pb <= pc else c)) & 255
    rows.append(line); prev = line
def scan(rgb, x0, x1):
    ys = []
    for y in range(40, 390):
        r = rows[y]
        for x in range(x0, x1):
            i = x * bpp
            if abs(r[i] - rgb[0]) < 40 and abs(r[i + 1] - rgb[1]) < 40 and abs(r[i + 2] - rgb[2]) < 40: ys.append(y)
    return ys
blue, orange = (0x1f, 0x77, 0xb4), (0xff, 0x7f, 0x0e)
nb, no = len(scan(blue, 70, 530)), len(scan(orange, 70, 530))
assert nb > 300, "train_loss line (blue): %d pixels" % nb
assert no > 100, "val_loss line (orange): %d pixels" % no
# train_loss falls: its pixels in the left tenth sit higher (smaller y) than in the right tenth
left, right = scan(blue, 72, 110), scan(blue, 480, 528)
assert left and right and sum(left) / len(left) < sum(right) / len(right), "train_loss does not go down the plot"
print("png ok", w, h, nb, no)
PY
# errors
"$PLOT" "$W/missing.csv" >"$W/e1.log" 2>&1; rc=$?
[[ $rc == 1 ]] && grep -q "missing.csv" "$W/e1.log" || die "a missing file: exit $rc, want 1 and its name"
printf 'a,b\n1,2\n' >"$W/nostep.csv"
"$PLOT" "$W/nostep.csv" >"$W/e2.log" 2>&1; rc=$?
[[ $rc == 1 ]] && grep -q "no 'step' column" "$W/e2.log" || die "no step column: exit $rc, want 1"
"$PLOT" "$W" >"$W/e5.log" 2>&1; rc=$?
[[ $rc == 1 ]] && grep -q "is a directory" "$W/e5.log" || die "a folder for the CSV: exit $rc: $(cat "$W/e5.log")"
"$PLOT" >"$W/e3.log" 2>&1; [[ $? == 2 ]] || die "no argument: want exit 2"
"$PLOT" --bogus x.csv >"$W/e4.log" 2>&1; [[ $? == 2 ]] || die "unknown option: want exit 2"
echo "plot_check: ok"
