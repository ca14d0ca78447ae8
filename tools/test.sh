#!/usr/bin/env bash
# tools/test.sh [--quick]: the README's test command (and CI's). Installs what is missing, then
# builds and tests eddy three ways, each in its own build directory:
#   build          g++, release                     unit, headers, examples, stress, install, docs, tools
#   build-asan     clang, ASan + UBSan (+LeakSan)   unit, examples, stress, install*
#   build-tsan     clang, TSan, 4-slot deques       unit, examples, stress, install*
# --quick: the edit-compile-test loop: `build` only, every suite once (io_uring), no second pass.
#
# Compile once: the builds go through ccache (tools/install-deps.sh installs it), set up so that
# another clone of the same tree on the same machine hits the cache. meson names every source
# and include directory relative to the build directory, so the commands are the same in any
# clone; the sanitizer builds' line tables would still hash the working directory, so ccache
# is told not to (CCACHE_NOHASHDIR) and clang writes "." as their compilation directory
# (-fdebug-compilation-dir=.): a report names files relative to the build directory.
#
# Suite 'install' (tests/install/): install/pkg-config (meson install --destdir, then a program
# built with `pkg-config --cflags --libs eddy` against that copy) and install/cmake (the same
# copy taken by a CMake project with find_package(eddy)) run in all three, built with the
# build's compiler and -fsanitize flags; install/subproject (eddy via dependency('eddy') in
# a temporary meson project: it compiles the library again) runs only in `build` (*: a
# sanitizer adds nothing there).
# Sanitizer builds use clang 14: it makes symmetric transfer a real tail call under the
# sanitizers (g++ 12 does not), which the million-deep await chain test needs.
# build-asan takes its frames from operator new (-Dframe_pool=false): LeakSan does not see
# inside the frame pool's mappings, and a leaked frame is what the shutdown tests look for.
# The pool itself still runs under ASan there (tests/tasks/frame_pool_test calls it
# directly; its free blocks are poisoned), and under TSan as every frame's allocator in
# build-tsan (stress/frame_pool_stress among others).
# The test programs are compiled at a lower level than the library they test
# (-Dtest_optimization): a test checks behaviour, not speed, and its own coroutines and
# templates are most of the build. In `build` they take -O1 (g++: a third cheaper than -O3),
# in the sanitizer builds -O0 (clang: half the time of -O2, where -O1 saves nothing). The
# library, examples and benchmarks keep the build's level, and so do tasks/task (its
# million-deep await chain needs g++'s tail calls, from -O2) and the stress programs (they
# run one at a time, so their run time is the command's). ASan also sees more at -O0: a
# stack variable's scope is exact there.
# A folder's test files compile a few at a time into one program each (tests/meson.build):
# their headers and shared templates then cost once per program, not once per file.
# The sanitizer builds keep line tables only (-gline-tables-only overrides debugoptimized's
# -g): a report's stack still names file, line and inlined frames, and the compile is about
# a sixth cheaper. What is a property of the text, not of how the code runs, is checked in
# `build` alone (tests/meson.build): that each public header stands alone (suite 'headers'),
# the docs' code (suite 'docs', -Ddoc_tests=disabled here), the layout, the layers and the
# tools (suite 'tools').
# Task dumps (-Dtask_dump, off by default) are on in both sanitizer builds: their full tests
# run there; `build` runs the default, where a dump lists tasks without their waits.
# Each build's suites then run a second time beside a CPU hog (tools/beside_hog.sh: two busy
# loops, one per core of the CI machine) and without io_uring (tools/no-io-uring: refused as a
# default container refuses it), so on the readiness driver: a test must hold on a loaded
# machine, so it counts events rather than timing them, and where time is the point its bound
# is wide; and everything must work on either driver. One pass checks both, at no cost in
# time; the first pass is io_uring's, quiet. Left out of the second pass are the suites
# whose outcome depends neither on timing nor on the driver: 'headers', 'compile_fail' and
# 'tools' and 'api_docs' (Doxygen's check) check what is compiled, written and laid out, and
# 'install' what is installed. The docs' programs ('docs') run in it: they run a Runtime.
# Ends with the wall time of each stage, then one line "tests: N passed, N failed" summing
# every pass.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=false
case ${1:-} in
--quick) quick=true ;;
"") ;;
*)
    echo "usage: $0 [--quick]" >&2
    exit 2
    ;;
esac

stage_names=()
stage_secs=()
stage() {  # stage LABEL COMMAND...: runs COMMAND and notes its wall time for the closing table
    local label=$1 start=$SECONDS
    shift
    "$@"
    stage_names+=("$label")
    stage_secs+=($((SECONDS - start)))
}
print_stage_times() {
    echo "== wall time per stage"
    local i
    for i in "${!stage_names[@]}"; do
        printf '  %-44s %5d s\n' "${stage_names[$i]}" "${stage_secs[$i]}"
    done
    printf '  %-44s %5d s\n' "all" "$SECONDS"
}
trap 'status=$?; rm -f "${findings:-}"; ((status == 0)) || print_stage_times' EXIT

stage "install what is missing" bash tools/install-deps.sh

launcher=""
if command -v ccache >/dev/null; then
    # Depend mode: on a miss ccache reads the compiler's own -MD list instead of running the
    # preprocessor first (0.2 s of CPU for a test file here, on every miss).
    export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true CCACHE_DEPEND=true
    launcher="ccache "
fi
ccache_counts() {  # hits and misses so far, "H M" ("0 0" without ccache)
    if [[ -z $launcher ]]; then
        echo "0 0"
        return
    fi
    ccache --print-stats | awk '$1 ~ /^(direct|preprocessed)_cache_hit$/ {h += $2}
                                $1 == "cache_miss" {m += $2} END {print h + 0, m + 0}'
}
read -r hits_before misses_before < <(ccache_counts)

setup() {  # setup DIR [meson options...]: (re)configures DIR
    local dir=$1
    shift
    if [[ -f "$dir/build.ninja" ]]; then
        meson setup --reconfigure "$dir" "$@" >/dev/null
    else
        meson setup "$dir" "$@" >/dev/null
    fi
}
build() {  # build DIR: ninja, quietly; on failure the compiler's messages
    local log
    log=$(mktemp)
    if ! ninja -C "$1" >"$log" 2>&1; then
        grep -v '^\[[0-9]*/[0-9]*\] ' "$log" | tail -200
        rm -f "$log"
        return 1
    fi
    rm -f "$log"
}

passed=0
failed=0
findings=$(mktemp)  # what failed, repeated at the end
suites() {  # suites LABEL [command...]: runs the command (a meson test), tallies its results
    local label=$1
    shift
    echo "== $label"
    local log status=0
    log=$(mktemp)
    # Not `|| true` after the pipeline: with pipefail a failed test run fails the pipeline,
    # and the `true` would then be what PIPESTATUS reports.
    set +e
    "$@" 2>&1 | tee "$log" | grep -E '^ *[0-9]+/[0-9]+ .*(FAIL|TIMEOUT|ERROR)|^(Ok|Fail|Skipped|Timeout):'
    local codes=("${PIPESTATUS[@]}")
    set -e
    status=${codes[0]}
    passed=$((passed + $(awk '/^Ok:/ {n = $2} END {print n + 0}' "$log")))
    failed=$((failed + $(awk '/^(Fail|Timeout):/ {n += $2} END {print n + 0}' "$log")))
    if ((status != 0)); then
        echo "== $label: FAILED; the failing tests' output follows"
        sed -n '/^=* [0-9]*\/[0-9]* =*$/,$p' "$log" | tail -200
        # The first findings again, one line each, for the summary at the end: a CI page
        # that shows only the end of a long log still says what failed.
        grep -E '^TEST CASE: |: (ERROR|FATAL ERROR): |^SUMMARY: [A-Za-z]+Sanitizer|^ThreadSanitizer: |^(ERROR|WARNING): [A-Za-z]+Sanitizer' \
            "$log" | head -12 | sed "s|^|== $label: |" >>"$findings"
        failed=$((failed > 0 ? failed : 1))
    fi
    rm -f "$log"
}

run() {  # run NAME DIR [env...]: builds DIR, runs all its suites, then again beside the hog
    local name=$1 dir=$2
    shift 2
    echo "== $name: building ($dir)"
    stage "$name: build" build "$dir"
    local test=(env "$@" meson test -C "$dir" --print-errorlogs --num-processes 2)
    stage "$name: tests" suites "$name: testing" "${test[@]}"
    if ! $quick; then  # its logs are meson-logs/testlog-hog.*, beside the first pass's testlog.*
        stage "$name: epoll tests beside a hog" suites "$name: testing on epoll (no io_uring) beside a CPU hog" \
            bash tools/beside_hog.sh "$dir/tools/no-io-uring" "${test[@]}" --logbase testlog-hog --no-suite install \
            --no-suite headers --no-suite compile_fail --no-suite tools --no-suite api_docs
    fi
}

# -Dtests and -Ddoc_tests are named: tools/demo.sh configures the same directory without them.
# The programs link with gold (binutils), in half the time of the default linker; the sanitizer
# builds with lld, LLVM's linker (gold floods them with warnings about the sanitizer's local
# symbols): about 40 % less. Most of a build from a warm cache is linking its 300-odd programs.
stage "g++ release: configure" setup build --buildtype=release -Dstress_tests=true -Dtests=enabled \
    -Ddoc_tests=enabled -Dcpp_link_args=-fuse-ld=gold -Dtest_optimization=1
run "g++ release" build

if ! $quick; then
    sanitizer_args=(--buildtype=debugoptimized "-Dcpp_args=-gline-tables-only -fdebug-compilation-dir=."
                    -Dcpp_link_args=-fuse-ld=lld -Db_lundef=false -Dstress_tests=true -Dbenchmarks=false -Dtask_dump=true -Ddoc_tests=disabled
                    -Dtest_optimization=0)
    CC="${launcher}clang" CXX="${launcher}clang++" stage "clang ASan+UBSan: configure" \
        setup build-asan "${sanitizer_args[@]}" -Db_sanitize=address,undefined -Dframe_pool=false
    run "clang ASan+UBSan" build-asan ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1 \
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

    CC="${launcher}clang" CXX="${launcher}clang++" stage "clang TSan: configure" \
        setup build-tsan "${sanitizer_args[@]}" -Db_sanitize=thread -Dsmall_queues=true
    run "clang TSan" build-tsan TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
fi

print_stage_times
if [[ -n $launcher ]]; then
    read -r hits_after misses_after < <(ccache_counts)
    echo "== ccache: $((hits_after - hits_before)) hits, $((misses_after - misses_before)) misses in this run"
fi
trap - EXIT
if [[ -s $findings ]]; then
    echo "== what failed (the first findings of each failed pass; the whole output is above)"
    cut -c1-400 "$findings"
fi
rm -f "$findings"
echo "tests: $passed passed, $failed failed"
((failed == 0))
