# tests/install/common.sh: what the install suite's scripts share (install_test.sh,
# cmake_test.sh, ../subproject/subproject_test.sh source it).

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# parse_compiler [-- CXX... [-- EXTRA_FLAGS...]]: the tail of a script's arguments (this build's
# compiler command, then the flags a program needs to link its libeddy, e.g. -fsanitize) into
# the arrays cxx and extra.
parse_compiler() {
    [[ ${1:-} == -- ]] && shift
    cxx=()
    while (($#)) && [[ $1 != -- ]]; do cxx+=("$1"); shift; done
    [[ ${1:-} == -- ]] && shift
    extra=("$@")
}

# install_copy BUILD_DIR DESTDIR LOG: `meson install --destdir` of an already built tree.
install_copy() {
    "$MESON" install -C "$1" --destdir "$2" --no-rebuild --quiet >"$3" 2>&1 ||
        { cat "$3"; fail "meson install --destdir failed"; }
}

# under_prefix DIR: a meson directory option under the script's $prefix (it may be absolute).
under_prefix() { [[ $1 == /* ]] && echo "$1" || echo "$prefix/$1"; }

# run_hello PROGRAM: tests/install/hello.cpp built; it must print its one line (exit 77: skip).
run_hello() {
    local out status=0 expected='hello from eddy: echo=ping sum=4950 slept=yes'
    out=$("$1") || status=$?
    ((status == 77)) && skip "${out#SKIP: }"
    ((status == 0)) || fail "hello exited with status $status: $out"
    [[ $out == "$expected" ]] || fail "hello printed '$out', expected '$expected'"
    echo "$out"
}
