#!/usr/bin/env bash
# tools/tidy.sh [BUILDDIR]: runs clang-tidy 14 (checks in the root .clang-tidy: bugprone-*,
# performance-*) over the library's sources (tasks/, runtime/, io/; not tests, examples or
# benchmarks), two files at a time, with the compile flags of BUILDDIR's
# compile_commands.json (default build-tidy, configured here if it has none: the flags and
# the generated config headers are all clang-tidy needs, nothing is compiled). Prints each
# finding once (a header's is reported by every file that includes it) and exits 1 if there
# is any. A finding that is wrong carries a NOLINT(check) comment saying why.
# Needs clang-tidy-14 (Debian package clang-tidy-14).
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# > 1)) || [[ ${1:-} == -* ]]; then
    echo "usage: $0 [BUILDDIR]" >&2
    exit 2
fi
build=${1:-build-tidy}
tidy=$(command -v clang-tidy-14 || true)
if [[ -z $tidy ]]; then
    echo "$0: needs clang-tidy-14 (apt-get install clang-tidy-14)" >&2
    exit 2
fi
if [[ ! -f $build/compile_commands.json ]]; then
    meson setup "$build" -Dtests=disabled -Dexamples=false -Dbenchmarks=false >/dev/null
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
git ls-files -z 'tasks/*.cpp' 'runtime/*.cpp' 'io/*.cpp' |
    xargs -0 -P2 -n1 "$tidy" -p "$build" --quiet --warnings-as-errors='*' >"$log" 2>/dev/null || status=$?
# A finding's first line names it: file:line:col: error: text [check]. Paths are made relative
# to the source root (the compile database's are relative to the build directory).
findings=$(grep -E '^[^ ].*:[0-9]+:[0-9]+: (warning|error): ' "$log" |
    sed -E -e "s#^($PWD/)?($build/)?(\.\./)?##" -e 's/ error: (.*),-warnings-as-errors\]$/ warning: \1]/' |
    sort -u || true)
if [[ -n $findings ]]; then
    echo "$findings"
    echo "$0: $(wc -l <<<"$findings") findings" >&2
    exit 1
fi
if ((status != 0)); then
    cat "$log" >&2
    echo "$0: clang-tidy failed" >&2
    exit 1
fi
