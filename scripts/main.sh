#!/usr/bin/env bash
# The main job: set-up, build, then train + test the default model on its default dataset.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target volt-fashion-mnist >/dev/null
exec ./build/apps/volt-fashion-mnist "$@"
