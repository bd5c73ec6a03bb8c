#!/usr/bin/env bash
# The layer rule (docs/ARCHITECTURE.md): a folder never includes a header from a layer above
# it, and data/ never includes core's private header (core/internal.h).
#   core < data, precision < strategies < trainer < callbacks < nn < models < cli < apps
# Public headers belong to the layer that implements them (table below). Exits 1 naming
# each violation; 0 when the tree keeps the rule.  Usage: check-layers.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

level_of_dir() {   # a source folder -> its level
  case "$1" in
    core|core/*) echo 0 ;;
    data|data/*|precision|precision/*) echo 1 ;;
    strategies|strategies/*) echo 2 ;;
    trainer|trainer/*) echo 3 ;;
    callbacks|callbacks/*) echo 4 ;;
    nn|nn/*) echo 5 ;;
    models|models/*) echo 6 ;;
    cli|cli/*) echo 7 ;;
    apps|apps/*) echo 8 ;;
    *) echo "" ;;
  esac
}
level_of_public() {   # volt/<name>.h -> the level of the layer that implements it
  case "$1" in
    core.h|version.h|export.h|ops.h|params.h|optim.h|safetensors.h|dtype.h|memory.h|backend.h) echo 0 ;;
    data.h|text.h|tokenizer.h|precision.h) echo 1 ;;
    strategy.h|strategies.h) echo 2 ;;
    trainer.h|checkpoint.h) echo 3 ;;
    callbacks.h) echo 4 ;;
    nn.h) echo 5 ;;
    models.h|distilbert.h|distilbert_hf.h) echo 6 ;;
    cli.h) echo 7 ;;
    volt.h) echo 8 ;;        # the umbrella: programs only
    *) echo "?" ;;
  esac
}
names=(core data/precision strategies trainer callbacks nn models cli apps)
bad=0
report() { echo "layers: $1"; bad=1; }

# Files of the library and the apps, and public headers including each other.
while IFS= read -r f; do
  dir=${f%/*}
  if [ "${f#include/volt/}" != "$f" ]; then
    me=$(level_of_public "${f#include/volt/}")
    [ "$me" = "?" ] && { report "$f: public header not in the layer table of scripts/check-layers.sh"; continue; }
  else
    me=$(level_of_dir "$dir")
    [ -z "$me" ] && continue
  fi
  while IFS= read -r inc; do
    case "$inc" in
      volt/*)
        lvl=$(level_of_public "${inc#volt/}")
        [ "$lvl" = "?" ] && { report "$f includes <$inc>, a public header not in the layer table"; continue; } ;;
      *)
        lvl=$(level_of_dir "${inc%/*}")
        [ -z "$lvl" ] && continue ;;
    esac
    if [ "$lvl" -gt "$me" ]; then
      report "$f (layer ${names[$me]}) includes \"$inc\" from the layer above (${names[$lvl]})"
    fi
    case "$dir:$inc" in
      data*:core/internal.h) report "$f includes core's private header core/internal.h" ;;
    esac
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]\([^>"]*\)[>"].*/\1/p' "$f")
done < <(find core data precision strategies trainer callbacks nn models cli apps include/volt \
              \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | sort)
[ "$bad" = 0 ] && echo "layers: ok"
exit $bad
