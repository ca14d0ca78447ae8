#!/usr/bin/env bash
# tests/install/install_test.sh: eddy as a system library. Installs the build into a temporary
# DESTDIR (`meson install --destdir`), checks what landed there (every public header under
# include/eddy/ and nothing else, the library, eddy.pc), then builds tests/install/hello.cpp
# with `pkg-config --cflags --libs eddy` against that copy alone and runs it. pkg-config is
# told `--define-variable=prefix=DESTDIR/PREFIX`: eddy.pc's paths are all ${prefix}-relative,
# so that relocates exactly eddy (PKG_CONFIG_SYSROOT_DIR would move liburing's system paths
# into the DESTDIR too). The source tree is on no include path.
#
# Usage (tests/install/meson.build passes all of it):
#   install_test.sh BUILD_DIR PREFIX LIBDIR INCLUDEDIR HELLO_CPP -- CXX... [-- EXTRA_FLAGS...]
# environment: MESON, PKG_CONFIG (programs), EDDY_PUBLIC_HEADERS (space-separated, relative
# to include/), EDDY_SOURCE_ROOT (must not leak into the flags).
# Exit 77 (skip) when pkg-config or meson is missing, or io_uring is unavailable.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"   # skip, fail, parse_compiler, install_copy, run_hello, under_prefix

build=$1 prefix=$2 libdir=$3 includedir=$4 hello=$5
shift 5
parse_compiler "$@"

[[ -n ${PKG_CONFIG:-} ]] && command -v "$PKG_CONFIG" >/dev/null || skip "pkg-config not found (apt-get install pkgconf)"
[[ -n ${MESON:-} ]] && command -v "$MESON" >/dev/null || skip "meson not found"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/dest
inc=$dest$(under_prefix "$includedir")
lib=$dest$(under_prefix "$libdir")

install_copy "$build" "$dest" "$tmp/install.log"

# 1. The headers: exactly the public ones (tests/headers compiles each of them alone).
(cd "$inc" && find eddy -type f | sort) >"$tmp/installed"
printf '%s\n' $EDDY_PUBLIC_HEADERS | sort >"$tmp/expected"
if ! diff -u "$tmp/expected" "$tmp/installed" >"$tmp/headers.diff"; then
    cat "$tmp/headers.diff"
    fail "installed headers under $includedir/eddy differ from the public list (- missing, + not public)"
fi
echo "headers: $(wc -l <"$tmp/installed") under $includedir/eddy, the public list exactly"

# 2. The library and eddy.pc.
[[ -f $lib/libeddy.a || -f $lib/libeddy.so ]] || fail "no libeddy.a or libeddy.so in $libdir"
pc=$lib/pkgconfig/eddy.pc
[[ -f $pc ]] || fail "no eddy.pc in $libdir/pkgconfig"
grep -Eq '^Requires:.*\bliburing\b' "$pc" || fail "eddy.pc: Requires lacks liburing"
grep -Eq '^Libs:.*-leddy\b' "$pc" || fail "eddy.pc: Libs lacks -leddy"
grep -Eq '^Libs:.*-pthread\b' "$pc" || fail "eddy.pc: Libs lacks -pthread"
grep -Eq '^Cflags:.*-I\$\{includedir\}' "$pc" || fail "eddy.pc: Cflags lacks -I\${includedir}"
echo "eddy.pc:"
sed 's/^/    /' "$pc"

# 3. pkg-config resolves it into the DESTDIR, and nothing points at the source tree.
export PKG_CONFIG_PATH=$lib/pkgconfig
pkg=("$PKG_CONFIG" --define-variable=prefix="$dest$prefix")
flags=$("${pkg[@]}" --cflags --libs eddy) || fail "pkg-config --cflags --libs eddy failed"
echo "pkg-config --cflags --libs eddy (prefix moved into the DESTDIR): $flags"
[[ " $flags " == *" -I$inc "* ]] || fail "the flags do not put $inc on the include path"
[[ " $flags " == *" -L$lib "* ]] || fail "the flags do not put $lib on the library path"
[[ -n ${EDDY_SOURCE_ROOT:-} && $flags == *"$EDDY_SOURCE_ROOT/"* ]] && fail "the flags point into the source tree"

# 4. A user's program, built in the temporary directory against the installed copy alone.
cp "$hello" "$tmp/hello.cpp"
cd "$tmp"
# shellcheck disable=SC2086  # the flags are words
"${cxx[@]}" -std=c++20 -O2 "${extra[@]}" hello.cpp -o hello $flags ||
    fail "hello.cpp does not build against the installed copy: ${cxx[*]} -std=c++20 -O2 ${extra[*]} hello.cpp $flags"
run_hello ./hello
