#!/usr/bin/env bash
# tools/test.sh: the README's test command (and CI's). Installs what is missing, then builds
# and tests eddy three ways, each in its own build directory:
#   build          g++, release                     unit, headers, examples, stress, install, docs
#   build-asan     clang, ASan + UBSan (+LeakSan)   unit, headers, examples, stress, install*
#   build-tsan     clang, TSan, 4-slot deques       unit, headers, examples, stress, install*
# Suite 'install' (tests/install/): install/pkg-config (meson install --destdir, then a program
# built with `pkg-config --cflags --libs eddy` against that copy) and install/cmake (the same
# copy taken by a CMake project with find_package(eddy)) run in all three, built with the
# build's compiler and -fsanitize flags; install/subproject (eddy via dependency('eddy') in
# a temporary meson project: it compiles the library again) runs only in `build` (*: to save
# time, and a sanitizer adds nothing there). The suite adds about a minute to `build`.
# Sanitizer builds use clang 14: it makes symmetric transfer a real tail call under the
# sanitizers (g++ 12 does not), which the million-deep await chain test needs.
# build-asan takes its frames from operator new (-Dframe_pool=false): LeakSan does not see
# inside the frame pool's mappings, and a leaked frame is what the shutdown tests look for.
# The pool itself still runs under ASan there (tests/tasks/frame_pool_test calls it
# directly; its free blocks are poisoned), and under TSan as every frame's allocator in
# build-tsan (stress/frame_pool_stress among others).
# The sanitizer builds keep line tables only (-gline-tables-only overrides debugoptimized's
# -g): a report's stack still names file, line and inlined frames, and the compile is about
# a sixth cheaper. They build no tests/headers programs (tests/meson.build: the release build
# checks that each public header stands alone).
# Task dumps (-Dtask_dump, off by default) are on in both sanitizer builds: their full tests
# run there; `build` runs the default, where a dump lists tasks without their waits.
# Each build's suites (but 'install', and 'compile_fail', 'docs' and 'tools', which check what
# is compiled, written and laid out, not how anything runs) then run a second time beside a CPU hog
# (tools/beside_hog.sh: two busy loops, one per core of the CI machine): a test must hold on
# a loaded machine, so it counts events rather than timing them, and where time is the point
# its bound is wide. The second pass costs about four minutes and no build.
# Suite 'docs' (tests/docs/): every C++ block of README.md, docs/ and benchmarks/README.md
# compiled, and run where it is a program; only in `build` (-Ddoc_tests=disabled in the
# sanitizer builds: the blocks call the library the other suites already test there).
# Ends with one line "tests: N passed, N failed" summing all six runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh

setup() {  # setup DIR [meson options...]: (re)configure DIR
    local dir=$1
    shift
    if [[ -f "$dir/build.ninja" ]]; then
        meson setup --reconfigure "$dir" "$@" >/dev/null
    else
        meson setup "$dir" "$@" >/dev/null
    fi
}

passed=0
failed=0
suites() {  # suites LABEL [command...]: runs the command (a meson test), tallies its results
    local label=$1
    shift
    echo "== $label"
    local log status=0
    log=$(mktemp)
    "$@" 2>&1 | tee "$log" | grep -E '^ *[0-9]+/[0-9]+ .*(FAIL|TIMEOUT|ERROR)|^(Ok|Fail|Skipped|Timeout):' || true
    status=${PIPESTATUS[0]}
    passed=$((passed + $(awk '/^Ok:/ {n = $2} END {print n + 0}' "$log")))
    failed=$((failed + $(awk '/^(Fail|Timeout):/ {n += $2} END {print n + 0}' "$log")))
    if ((status != 0)); then
        echo "== $label: FAILED; the failing tests' output follows"
        sed -n '/^=* [0-9]*\/[0-9]* =*$/,$p' "$log" | tail -200
        failed=$((failed > 0 ? failed : 1))
    fi
    rm -f "$log"
}

run() {  # run NAME DIR [env...]: builds DIR, runs all its suites, then the runtime ones beside the hog
    local name=$1 dir=$2
    shift 2
    echo "== $name: building ($dir)"
    ninja -C "$dir" >/dev/null
    local test=(env "$@" meson test -C "$dir" --print-errorlogs --num-processes 2)
    suites "$name: testing" "${test[@]}"
    suites "$name: testing beside a CPU hog" bash tools/beside_hog.sh "${test[@]}" --no-suite install \
        --no-suite compile_fail --no-suite docs --no-suite tools
}

setup build --buildtype=release -Dstress_tests=true
run "g++ release" build

CC=clang CXX=clang++ setup build-asan --buildtype=debugoptimized -Db_sanitize=address,undefined \
    -Dcpp_args=-gline-tables-only -Db_lundef=false -Dstress_tests=true -Dbenchmarks=false -Dframe_pool=false -Dtask_dump=true \
    -Ddoc_tests=disabled
run "clang ASan+UBSan" build-asan ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

CC=clang CXX=clang++ setup build-tsan --buildtype=debugoptimized -Db_sanitize=thread \
    -Dcpp_args=-gline-tables-only -Db_lundef=false -Dstress_tests=true -Dsmall_queues=true -Dbenchmarks=false -Dtask_dump=true \
    -Ddoc_tests=disabled
run "clang TSan" build-tsan TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

echo "tests: $passed passed, $failed failed"
((failed == 0))
