#!/usr/bin/env bash
# scripts/setup.sh's package detection (one dpkg-query for all packages): an installed
# package is not reported, an unknown one and a known-but-not-installed one are, in the
# order given, and a bad argument is refused. Skipped where dpkg-query is missing.
set -uo pipefail
SETUP=${1:?path to scripts/setup.sh}
command -v dpkg-query >/dev/null || { echo "SKIP: no dpkg-query (not Debian)"; exit 77; }
fail() { echo "setup_check: FAILED: $*"; exit 1; }
dpkg-query -W -f='${Status}' bash 2>/dev/null | grep -q "install ok installed" || { echo "SKIP: bash is not a dpkg package here"; exit 77; }
# a package dpkg knows of but that is not installed, if the database has one
known=$(dpkg-query -W -f='${Package} ${Status}\n' 2>/dev/null | awk '$4 != "installed" { print $1; exit }')
want=(volt-no-such-package-a)
[ -n "$known" ] && want+=("$known")
want+=(volt-no-such-package-b)
out=$("$SETUP" --missing bash volt-no-such-package-a coreutils ${known:+"$known"} volt-no-such-package-b) ||
    fail "--missing exited with status $?"
[ "$out" = "$(printf '%s\n' "${want[@]}")" ] || fail "--missing printed [$out], expected [$(printf '%s ' "${want[@]}")]"
out=$("$SETUP" --missing bash coreutils) || fail "--missing (all installed) exited with status $?"
[ -z "$out" ] || fail "installed packages reported missing: [$out]"
"$SETUP" --no-such-flag >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "an unknown argument gave exit status $rc, expected 2 (nothing installed)"
echo "setup_check: ok"
