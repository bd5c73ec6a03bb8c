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
# Which of the named packages are not installed ("install ok installed"), in one dpkg-query
# for all of them (one query per package cost ~0.1 s each, ~1.5 s in all, on every main.sh
# run). dpkg-query prints "name want flag state" for the packages it knows; one it does not
# know is missing too.
missing_of() {
  local -A ok=()
  local name want flag state p
  while read -r name want flag state; do
    [ "$want $flag $state" = "install ok installed" ] && ok["${name%%:*}"]=1
  done < <(dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null || true)
  for p in "$@"; do [ -n "${ok[$p]:-}" ] || echo "$p"; done
}
# scripts/setup.sh --missing PKG...: print the named packages that are not installed, one a
# line, install nothing (tests/setup_check.sh checks the detection with it).
if [ "${1:-}" = "--missing" ]; then
  shift
  [ $# -gt 0 ] || { echo "usage: setup.sh [--missing PKG...]" >&2; exit 2; }
  missing_of "$@"
  exit 0
fi
[ $# -eq 0 ] || { echo "setup.sh: unknown argument '$1' (usage: setup.sh [--missing PKG...])" >&2; exit 2; }
mapfile -t missing < <(missing_of "${PKGS[@]}")
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  # A fresh machine's apt-daily / unattended-upgrades (or another set-up) may hold apt's locks:
  # wait instead of failing at once. install waits for dpkg's lock (DPkg::Lock::Timeout, up to
  # 10 minutes); update takes the lists lock, which that option does not cover: retried.
  LOCK=(-o DPkg::Lock::Timeout=600)
  for i in $(seq 60); do
    $SUDO apt-get "${LOCK[@]}" update -qq && break
    [ "$i" -lt 60 ] || { echo "setup: apt-get update kept failing (another apt holds its lock?)" >&2; exit 1; }
    sleep 10
  done
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${LOCK[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
