#!/usr/bin/env bash
# libvolt.so exports exactly the public API: every dynamic symbol it defines is a volt_*
# name declared in include/volt/*.h, and every function declared there is exported.
#   check-exports.sh SOURCE_DIR LIBVOLT_SO
set -euo pipefail
src=$1 so=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# (".gomp_critical_user_*" are the locks of named OpenMP critical sections: the compiler
# makes them global so every copy of the name shares one lock; "__odr_asan.*" are
# AddressSanitizer's ODR indicators of exported data in a sanitizer build. Neither is API.)
nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | grep -v -e '^\.gomp_critical_user_' -e '^__odr_asan\.' |
  sort -u >"$tmp/exported"
# Declared functions: "VOLT_API <type> volt_name(" in the public headers.
# Declared: functions "VOLT_API <type> volt_name(" and data "VOLT_API extern const <type> volt_name;".
{ cat "$src"/include/volt/*.h | tr '\n' ' ' | grep -o 'VOLT_API[^;{(]*(' | grep -o 'volt_[A-Za-z0-9_]*[[:space:]]*($' |
    sed 's/[[:space:]]*($//'
  cat "$src"/include/volt/*.h | grep -o 'VOLT_API extern const [A-Za-z0-9_ *]*volt_[A-Za-z0-9_]*;' |
    grep -o 'volt_[A-Za-z0-9_]*;$' | tr -d ';'; } | sort -u >"$tmp/declared"
bad=0
extra=$(comm -23 "$tmp/exported" "$tmp/declared")
if [ -n "$extra" ]; then
  echo "exports: libvolt.so exports names that are not public API (make them static or volt__* internal):"
  echo "$extra" | sed 's/^/  /'; bad=1
fi
missing=$(comm -13 "$tmp/exported" "$tmp/declared")
if [ -n "$missing" ]; then
  echo "exports: public functions declared VOLT_API but not exported (not defined in the library?):"
  echo "$missing" | sed 's/^/  /'; bad=1
fi
unmarked=$(grep -hE '^(const |unsigned |struct |enum )?[A-Za-z_][A-Za-z0-9_]*[ *]+\**volt_[A-Za-z0-9_]*\(' "$src"/include/volt/*.h | grep -v '^static' || true)
if [ -n "$unmarked" ]; then
  echo "exports: public declarations without VOLT_API (hidden from libvolt.so):"
  echo "$unmarked" | sed 's/^/  /'; bad=1
fi
[ "$bad" = 0 ] && echo "exports: $(wc -l <"$tmp/exported") symbols, all public volt_* API"
exit $bad
