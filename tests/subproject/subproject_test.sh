#!/usr/bin/env bash
# tests/subproject/subproject_test.sh: eddy as a meson subproject. Makes a temporary project
# (tests/subproject/meson.build and tests/install/hello.cpp) with subprojects/eddy a symlink to
# this source tree, configures it with --force-fallback-for=eddy (an eddy installed on the
# machine must not stand in for the subproject), builds it (eddy's library only: its tests,
# benchmarks and examples are off) and runs the program.
#
# Usage: subproject_test.sh SOURCE_ROOT CXX...   (environment: MESON, NINJA)
# Exit 77 (skip) when meson or ninja is missing, or io_uring is unavailable.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../install/common.sh"   # skip, fail, run_hello

src=$1
shift
[[ -n ${MESON:-} ]] && command -v "$MESON" >/dev/null || skip "meson not found"
[[ -n ${NINJA:-} ]] && command -v "$NINJA" >/dev/null || skip "ninja not found"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/user/subprojects"
cp "$src/tests/subproject/meson.build" "$src/tests/install/hello.cpp" "$tmp/user/"
ln -s "$(cd "$src" && pwd)" "$tmp/user/subprojects/eddy"

# The compiler of the build that runs this test (meson reads CXX as a command line).
CXX="$*" "$MESON" setup "$tmp/build" "$tmp/user" --force-fallback-for=eddy >"$tmp/setup.log" 2>&1 ||
    { cat "$tmp/setup.log"; fail "meson setup of the user project failed"; }
grep -E "^Run-time dependency eddy|^Dependency eddy|eddy.*subproject" "$tmp/setup.log" | head -3 || true
"$NINJA" -C "$tmp/build" -j 2 >"$tmp/build.log" 2>&1 || { tail -50 "$tmp/build.log"; fail "the user project does not build"; }
[[ -f $tmp/build/subprojects/eddy/libeddy.a || -f $tmp/build/subprojects/eddy/libeddy.so ]] ||
    fail "the program was not linked with the subproject's libeddy"
extra=$(find "$tmp/build/subprojects/eddy" -type f -executable -not -name '*.so*' | head -3)
[[ -z $extra ]] || fail "the subproject built programs (default_options ignored?): $extra"
echo "built: $(grep -c . <(find "$tmp/build/subprojects/eddy" -name '*.o')) objects of eddy in subprojects/eddy"

run_hello "$tmp/build/hello"
