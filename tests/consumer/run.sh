#!/usr/bin/env bash
# Install volt from BUILD_DIR into a fresh prefix, then build and run the consumer program
# against it four ways: find_package (volt::volt and volt::volt_static), pkg-config (shared
# and --static), and add_subdirectory of the source tree; and README.md's example, built with
# pkg-config as copied. Any failure fails the test.
#   run.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
lib=$(ls -d "$prefix"/lib*/ | head -1); lib=${lib%/}
for f in include/volt/volt.h include/volt/version.h; do [ -f "$prefix/$f" ] || { echo "missing $f"; exit 1; }; done
for f in libvolt.a libvolt.so pkgconfig/volt.pc cmake/volt/voltConfig.cmake cmake/volt/voltConfigVersion.cmake; do
  [ -e "$lib/$f" ] || { echo "missing lib/$f"; exit 1; }
done
major=$(sed -n 's/^#define VOLT_VERSION_MAJOR \([0-9]*\).*/\1/p' "$src/include/volt/version.h")
soname=$(objdump -p "$lib/libvolt.so" | awk '/SONAME/ {print $2}')
[ "$soname" = "libvolt.so.$major" ] || { echo "SONAME is '$soname', want libvolt.so.$major"; exit 1; }
[ -x "$prefix/bin/volt-run" ] || { echo "missing bin/volt-run"; exit 1; }
# the apps, where this build made them (VOLT_BUILD_APPS): volt-plot too, which the docs name
for app in volt-fashion-mnist volt-text-classification volt-plot; do
  [ ! -x "$build/apps/$app" ] || [ -x "$prefix/bin/$app" ] || { echo "missing bin/$app (built in $build/apps)"; exit 1; }
done

run() {   # run NAME BINARY: the program must train, test on best, and say so
  local name=$1 bin=$2
  "$bin" "$work/run-$name" >"$work/$name.out" 2>&1 || { echo "consumer ($name) failed:"; cat "$work/$name.out"; exit 1; }
  grep -q "^consumer: volt .*test_acc" "$work/$name.out" || { echo "consumer ($name): no result line"; cat "$work/$name.out"; exit 1; }
  echo "$name: $(cat "$work/$name.out" | tail -1)"
}
links_shared() { ldd "$1" | grep "libvolt.so.$major" >/dev/null; }   # not grep -q: an early exit SIGPIPEs ldd under pipefail

# 1. find_package, shared and static
for mode in find_package find_package_static; do
  cmake -S "$src/tests/consumer" -B "$work/$mode" -DVOLT_CONSUMER=$mode -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_BUILD_TYPE=Release >"$work/$mode.cfg.log" 2>&1 || { cat "$work/$mode.cfg.log"; exit 1; }
  cmake --build "$work/$mode" >"$work/$mode.build.log" 2>&1 || { cat "$work/$mode.build.log"; exit 1; }
  run "$mode" "$work/$mode/consumer"
done
links_shared "$work/find_package/consumer" || { echo "find_package: volt::volt did not link libvolt.so"; exit 1; }
! links_shared "$work/find_package_static/consumer" || { echo "find_package: volt::volt_static linked libvolt.so"; exit 1; }

# 2. pkg-config, shared and --static (libvolt.a picked by name; the rest from Libs.private/Requires.private)
export PKG_CONFIG_PATH="$lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
want=$(sed -n 's/^#define VOLT_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$src/include/volt/version.h" | paste -sd.)
[ "$(pkg-config --modversion volt)" = "$want" ] || { echo "pkg-config says $(pkg-config --modversion volt), want $want"; exit 1; }
cc -o "$work/pc-shared" "$src/tests/consumer/consumer.c" $(pkg-config --cflags --libs volt) -Wl,-rpath,"$lib"
run pkg-config "$work/pc-shared"
links_shared "$work/pc-shared" || { echo "pkg-config: did not link libvolt.so"; exit 1; }
static_libs=$(pkg-config --static --libs volt | sed 's/-lvolt\b/-l:libvolt.a/')
cc -o "$work/pc-static" "$src/tests/consumer/consumer.c" $(pkg-config --cflags volt) $static_libs
run pkg-config-static "$work/pc-static"
! links_shared "$work/pc-static" || { echo "pkg-config --static: linked libvolt.so"; exit 1; }

# 3. README.md's example, as a user copies it: the first ```c block, built with pkg-config
# without edits; run on Fashion-MNIST where scripts/setup.sh installed it (3 epochs, ~25 s),
# then again: it resumes from "last" (nothing left to train) and tests the same best weights.
awk '/^```c$/ { f = 1; next } f && /^```$/ { exit } f' "$src/README.md" >"$work/readme.c"
cc -o "$work/readme" "$work/readme.c" $(pkg-config --cflags --libs volt) -Wl,-rpath,"$lib" 2>"$work/readme.build.log" ||
  { echo "README.md's example does not build:"; cat "$work/readme.build.log"; exit 1; }
if [ -r /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ]; then
  mkdir -p "$work/readme-run"
  for i in 1 2; do
    (cd "$work/readme-run" && "$work/readme" >"$work/readme.$i.out" 2>"$work/readme.$i.err") ||
      { echo "README.md's example (run $i) failed:"; tail -5 "$work/readme.$i.err"; exit 1; }
  done
  acc1=$(awk '$1 == "test_acc" { print $2 }' "$work/readme.1.out"); acc2=$(awk '$1 == "test_acc" { print $2 }' "$work/readme.2.out")
  [ -n "$acc1" ] && [ "$acc1" = "$acc2" ] || { echo "README.md's example: test_acc '$acc1', after the resume '$acc2'"; exit 1; }
  awk -v a="$acc1" 'BEGIN { exit !(a > 0.8) }' || { echo "README.md's example: test_acc $acc1 after 3 epochs"; exit 1; }
  echo "README example: test_acc $acc1, the same after resuming from last"
  # a run that cannot write its logs fails, saying why (it ignored every status before)
  mkdir -p "$work/readme-bad" && echo x >"$work/readme-bad/lightning_logs"
  (cd "$work/readme-bad" && "$work/readme" >"$work/readme.bad.out" 2>"$work/readme.bad.err") &&
    { echo "README.md's example: exit 0 where lightning_logs is a file"; exit 1; }
  grep -q "lightning_logs" "$work/readme.bad.err" ||
    { echo "README.md's example failed without naming lightning_logs:"; cat "$work/readme.bad.err"; exit 1; }
  echo "README example: fails naming the problem where it cannot write: $(grep -m1 lightning_logs "$work/readme.bad.err" | cut -c1-160)"
fi

# 4. add_subdirectory of the source tree (the library alone is built). Without the cuda
# backend: its kernels take three quarters of a library build's CPU (219 s against 56 s) and
# the installed library above, linked four ways, already carries them (VOLT_CUDA=AUTO).
cmake -S "$src/tests/consumer" -B "$work/subdir" -DVOLT_CONSUMER=subdir -DVOLT_SOURCE="$src" -DVOLT_CUDA=OFF \
      -DCMAKE_BUILD_TYPE=Release >"$work/subdir.cfg.log" 2>&1 || { cat "$work/subdir.cfg.log"; exit 1; }
cmake --build "$work/subdir" -j"$(nproc)" >"$work/subdir.build.log" 2>&1 || { tail -30 "$work/subdir.build.log"; exit 1; }
run add_subdirectory "$work/subdir/consumer"
echo "consumer: all four ways built and ran"
