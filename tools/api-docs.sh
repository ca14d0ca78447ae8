#!/usr/bin/env bash
# tools/api-docs.sh [OUTDIR]: generates eddy's API reference (HTML, by Doxygen from the
# public headers' comments; settings in tools/api-docs/Doxyfile) into OUTDIR, by default
# build/api-docs/; open OUTDIR/html/index.html.
# tools/api-docs.sh --check [OUTDIR]: the same, then fails (exit 1) if Doxygen warned,
# listing each warning as file:line: text. A warning is an undocumented public name (a
# class, function, enumerator, alias, data member or concept outside the detail
# namespaces) or a malformed comment. It also fails, before running Doxygen, when the
# Doxyfile's INPUT leaves out a public include root (a folder's include/eddy). The test
# command runs the check as the meson test api-docs (suite docs, tests/api_docs/) wherever
# doxygen is installed.
# Needs doxygen (Debian package doxygen; tools/install-deps.sh installs it).
set -euo pipefail
check=false
if [[ ${1:-} == --check ]]; then
    check=true
    shift
fi
if (($# > 1)) || [[ ${1:-} == -* ]]; then
    echo "usage: $0 [--check] [OUTDIR]" >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$root/build/api-docs}" && cd "${1:-$root/build/api-docs}" && pwd)
if ! command -v doxygen >/dev/null; then
    echo "$0: doxygen not found (apt-get install doxygen, or tools/install-deps.sh)" >&2
    exit 1
fi
version=$(sed -n "s/^ *version : '\(.*\)',$/\1/p" "$root/meson.build" | head -1)
log=$out/warnings.log
cd "$root"
# Every public include root (a folder's include/eddy under tasks/, runtime/ or io/) must be in
# the Doxyfile's INPUT: a root left out is not read, so it cannot warn, and --check would pass
# with part of the API missing from the reference.
inputs=" $(sed -n '/^INPUT *=/,/[^\\]$/p' tools/api-docs/Doxyfile | tr -d '\\' | sed 's/^INPUT *=//' | tr -s ' \n' ' ') "
missing=()
while IFS= read -r dir; do
    [[ $inputs == *" $dir "* ]] || missing+=("$dir")
done < <(find tasks runtime io -type d -path '*/include/eddy' | sort)
if ((${#missing[@]})); then
    echo "$0: tools/api-docs/Doxyfile's INPUT lacks public include roots: ${missing[*]}" >&2
    $check && exit 1
fi
# The Doxyfile, then what this run sets (a later setting wins), read from stdin; doxygen
# runs from the root, which the Doxyfile's paths are relative to.
{
    cat tools/api-docs/Doxyfile
    echo "OUTPUT_DIRECTORY = \"$out\""
    echo "PROJECT_NUMBER = \"$version\""
    echo "WARN_LOGFILE = \"$log\""
} | doxygen -
# Warnings name files by absolute path: shorten them to the repository's.
sed -i "s|^$root/||" "$log"
if [[ -s $log ]]; then
    if $check; then
        echo "$0: doxygen warned ($(wc -l <"$log") warnings):" >&2
        cat "$log" >&2
        exit 1
    fi
    echo "$0: doxygen warned ($(wc -l <"$log") warnings; see $log)" >&2
fi
echo "API reference: $out/html/index.html"
