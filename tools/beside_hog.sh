#!/usr/bin/env bash
# tools/beside_hog.sh [-n LOOPS] COMMAND [ARGS...]: runs COMMAND while LOOPS busy loops
# (default 2, one per core of the CI machine) compete with it for the CPU at the same
# priority, then stops them and exits with COMMAND's status. The test command runs every
# suite a second time this way: a test that holds only on a quiet machine fails here.
# The loops are plain shell loops (no dependency); they end with this script, even when it
# is interrupted.
set -uo pipefail
loops=2
if [[ ${1:-} == -n ]]; then
    loops=$2
    shift 2
fi
if (($# == 0)); then
    echo "usage: $0 [-n LOOPS] COMMAND [ARGS...]" >&2
    exit 2
fi
hogs=()
stop_hogs() {
    ((${#hogs[@]})) && kill "${hogs[@]}" 2>/dev/null
    wait "${hogs[@]}" 2>/dev/null
    hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < loops; i++)); do
    bash -c 'while :; do :; done' &
    hogs+=($!)
done
"$@"
status=$?
stop_hogs
exit $status
