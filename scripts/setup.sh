#!/usr/bin/env bash
# Installs what volt needs on Debian 12, idempotently: only missing packages are fetched.
set -euo pipefail
PKGS=(build-essential cmake pkg-config libopenblas-openmp-dev libdnnl-dev libcjson-dev zlib1g-dev
      libopenmpi-dev openmpi-bin dataset-fashion-mnist
      protobuf-compiler librsvg2-bin)   # tests: protoc reads TensorBoard files, rsvg-convert renders plots
# the fuzz targets (tests/fuzz, scripts/fuzz.sh): clang with libFuzzer and its OpenMP
command -v clang >/dev/null 2>&1 || PKGS+=(clang)
PKGS+=(libclang-rt-dev libomp-dev)
command -v npm >/dev/null 2>&1 || PKGS+=(npm)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
