#!/usr/bin/env bash
# tests/install/cmake_test.sh: eddy for CMake projects. Installs the build into a temporary
# DESTDIR (`meson install --destdir`), checks that <libdir>/cmake/eddy/ holds eddyConfig.cmake
# and eddyConfigVersion.cmake, then configures tests/install/cmake/ (a user's CMakeLists.txt:
# find_package(eddy MAJOR.MINOR REQUIRED), target_link_libraries(hello PRIVATE eddy::eddy),
# and checks of what eddy::eddy carries) with CMAKE_PREFIX_PATH the DESTDIR's prefix, builds
# tests/install/hello.cpp with it and runs it. The DESTDIR copy is a moved prefix: it works only
# because the package finds its paths from its own place. Then the version file: a range
# MAJOR.MINOR...<MAJOR+1 is found, and find_package(eddy 99 REQUIRED) must fail.
#
# Usage (tests/install/meson.build passes all of it):
#   cmake_test.sh BUILD_DIR PREFIX LIBDIR INCLUDEDIR VERSION TLS(ON|OFF) PROJECT_DIR HELLO_CPP \
#       -- CXX... [-- EXTRA_FLAGS...]
# VERSION is what a user asks for, MAJOR.MINOR of meson.build's project(); TLS says whether
# this build has eddy::tls (then eddy::eddy must bring OpenSSL).
# environment: MESON, NINJA, CMAKE (programs), EDDY_SOURCE_ROOT (must not leak into the build).
# Exit 77 (skip) when cmake, meson or ninja is missing, or io_uring is unavailable.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"   # skip, fail, parse_compiler, install_copy, run_hello, under_prefix

build=$1 prefix=$2 libdir=$3 includedir=$4 version=$5 tls=$6 project=$7 hello=$8
shift 8
parse_compiler "$@"

[[ -n ${CMAKE:-} ]] && command -v "$CMAKE" >/dev/null || skip "cmake not found (apt-get install cmake)"
[[ -n ${MESON:-} ]] && command -v "$MESON" >/dev/null || skip "meson not found"
[[ -n ${NINJA:-} ]] && command -v "$NINJA" >/dev/null || skip "ninja not found"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/dest
lib=$dest$(under_prefix "$libdir")
inc=$dest$(under_prefix "$includedir")
pkgdir=$lib/cmake/eddy

install_copy "$build" "$dest" "$tmp/install.log"

# 1. The package files, with no path of this build or source tree in them.
for f in eddyConfig.cmake eddyConfigVersion.cmake; do
    [[ -f $pkgdir/$f ]] || fail "no $f in $libdir/cmake/eddy"
    if grep -nF -e "$(cd "$build" && pwd)" ${EDDY_SOURCE_ROOT:+-e "$EDDY_SOURCE_ROOT"} "$pkgdir/$f"; then
        fail "$f names the build or source tree"
    fi
done
grep -q 'PACKAGE_PREFIX_DIR "${CMAKE_CURRENT_LIST_DIR}/' "$pkgdir/eddyConfig.cmake" ||
    fail "eddyConfig.cmake does not find its prefix from its own place"
echo "installed: $libdir/cmake/eddy/{eddyConfig,eddyConfigVersion}.cmake"

# 2. The user's project, configured with this build's compiler (a launcher such as ccache in
# front of it stays a launcher; other words of the command go into the flags) and flags.
compiler=("${cxx[@]}") launcher=()
case ${compiler[0]##*/} in ccache | sccache) launcher=("${compiler[0]}"); compiler=("${compiler[@]:1}") ;; esac
flags="${compiler[*]:1} ${extra[*]}"
cp "$project/CMakeLists.txt" "$hello" "$tmp/"
configure() {  # configure BUILD_SUBDIR VERSION_WANTED
    "$CMAKE" -S "$tmp" -B "$tmp/$1" -G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA" \
        -DCMAKE_PREFIX_PATH="$dest$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
        -DCMAKE_CXX_COMPILER="${compiler[0]}" ${launcher[0]:+-DCMAKE_CXX_COMPILER_LAUNCHER="${launcher[0]}"} \
        -DCMAKE_CXX_FLAGS="${flags# }" -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
        -DEDDY_WANTED="$2" -DEDDY_EXPECTED_DIR="$pkgdir" -DEDDY_EXPECTED_TLS="$tls"
}
configure user "$version" >"$tmp/configure.log" 2>&1 ||
    { cat "$tmp/configure.log"; fail "cmake cannot configure the user project with find_package(eddy $version REQUIRED)"; }
grep -E -- '-- (eddy|eddy::eddy) ' "$tmp/configure.log" | sed 's/^/    /'
"$CMAKE" --build "$tmp/user" >"$tmp/build.log" 2>&1 ||
    { tail -50 "$tmp/build.log"; fail "hello.cpp does not build with eddy::eddy"; }

# 3. What reached the compiler and the linker: C++20, -pthread, the installed headers and
# library (eddy.pc's Cflags and Libs), liburing, OpenSSL in a TLS build; nothing of the tree.
compile=$(grep -F '"command"' "$tmp/user/compile_commands.json" | grep -F hello.cpp)
link=$("$NINJA" -C "$tmp/user" -t commands hello | tail -1)
[[ $compile =~ -std=(gnu|c)\+\+(20|2a) ]] || fail "hello.cpp is not compiled as C++20: $compile"
[[ " $compile " == *" -pthread "* ]] || fail "hello.cpp is not compiled with -pthread: $compile"
[[ $compile == *" -isystem $inc "* || $compile == *" -I$inc "* ]] || fail "the installed include directory is not on the path: $compile"
[[ $link == *"$lib/libeddy."* ]] || fail "hello is not linked with the installed libeddy: $link"
[[ " $link " == *" -pthread "* ]] || fail "hello is not linked with -pthread: $link"
[[ $link == *"uring"* ]] || fail "hello is not linked with liburing: $link"
if [[ $tls == ON ]]; then
    [[ $link == *ssl* && $link == *crypto* ]] || fail "hello is not linked with OpenSSL in a TLS build: $link"
fi
if [[ -n ${EDDY_SOURCE_ROOT:-} && "$compile $link" == *"$EDDY_SOURCE_ROOT/"* ]]; then
    fail "the commands point into the source tree"
fi
echo "compile: $compile"
echo "link: $link"

# 4. The program.
run_hello "$tmp/user/hello"

# 5. The version file: a range within the major version is found; 99 is not.
major=${version%%.*}
configure range "$version...<$((major + 1))" >"$tmp/range.log" 2>&1 ||
    { cat "$tmp/range.log"; fail "find_package(eddy $version...<$((major + 1)) REQUIRED) failed"; }
echo "find_package(eddy $version...<$((major + 1)) REQUIRED): found"
if configure v99 99 >"$tmp/v99.log" 2>&1; then
    cat "$tmp/v99.log"
    fail "find_package(eddy 99 REQUIRED) succeeded"
fi
# CMake: 'Could not find a configuration file for package "eddy" that is compatible with
# requested version "99"' (wrapped), then the file it turned down with its version.
considered=$(grep -F "$pkgdir/eddyConfig.cmake, version: " "$tmp/v99.log" || true)
if ! grep -q 'requested version "99"' "$tmp/v99.log" || [[ -z $considered ]]; then
    cat "$tmp/v99.log"
    fail "find_package(eddy 99 REQUIRED) failed, but not because the installed version was turned down"
fi
echo "find_package(eddy 99 REQUIRED): fails, turned down${considered##*eddyConfig.cmake}"

