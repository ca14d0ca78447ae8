#!/usr/bin/env bash
# tools/format.sh: lays out every tracked .cpp and .hpp by the root .clang-format, in place.
# tools/format.sh --check: changes nothing; lists each file that would change (with how many
# of its lines), and each line past the 120 columns of .clang-format that it leaves alone (a
# comment: ReflowComments is off), and exits 1 if there is any.
# Needs clang-format 14 (Debian package clang-format-14): another version lays some
# constructs out differently, so the check would flag files nobody touched. A folder can opt
# out with its own .clang-format (tests/compile_fail/ does: DisableFormat).
set -euo pipefail
cd "$(dirname "$0")/.."
check=false
if [[ ${1:-} == --check ]]; then
    check=true
    shift
fi
if (($# > 0)); then
    echo "usage: $0 [--check]" >&2
    exit 2
fi
format=$(command -v clang-format-14 || command -v clang-format || true)
if [[ -z $format ]] || ! "$format" --version | grep -q 'version 14\.'; then
    echo "$0: needs clang-format 14 (apt-get install clang-format-14)" >&2
    exit 2
fi

if ! $check; then
    git ls-files -z '*.cpp' '*.hpp' | xargs -0 -P2 -n16 "$format" -i --style=file
    exit 0
fi
# One line per differing file, "N lines: path". The tracked files and their .clang-format files
# are copied to a scratch tree and formatted there in place, 32 files a clang-format process
# and two at a time (the CI machine's cores), then compared with the originals.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
git ls-files -z '*.cpp' '*.hpp' '.clang-format' '*/.clang-format' | xargs -0 cp --parents -t "$scratch"
(cd "$scratch" && git -C "$OLDPWD" ls-files -z '*.cpp' '*.hpp' | xargs -0 -P2 -n32 "$format" -i --style=file)
report=$(git ls-files '*.cpp' '*.hpp' | while IFS= read -r f; do
    d=$(diff "$f" "$scratch/$f") && continue
    n=$(grep -c "^<" <<<"$d" || true)
    if ((n == 0)); then n=$(grep -c "^>" <<<"$d"); fi  # only lines added (a namespace comment)
    echo "$n lines: $f"
done)
status=0
if [[ -n $report ]]; then
    sort -t: -k2 <<<"$report"
    echo "$0: $(wc -l <<<"$report") files differ from .clang-format; tools/format.sh formats them" >&2
    status=1
fi
# Counted in characters, not bytes (a comment may hold a non-ASCII sign).
long=$(git ls-files -z '*.cpp' '*.hpp' | LC_ALL=C.UTF-8 xargs -0 grep -nE '^.{121,}' | cut -d: -f1,2 || true)
if [[ -n $long ]]; then
    echo "$long"
    echo "$0: $(wc -l <<<"$long") lines past 120 columns; wrap them by hand" >&2
    status=1
fi
exit $status
