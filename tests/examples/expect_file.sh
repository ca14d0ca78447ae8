#!/bin/sh
# tests/examples/expect_file.sh PROGRAM EXPECTED_FILE [MIN_MS MAX_MS]: runs PROGRAM and fails
# unless its standard output equals EXPECTED_FILE byte for byte and, when given, it ran for at
# least MIN_MS and less than MAX_MS milliseconds (wall clock). Keep the bounds coarse: a lower
# bound the program guarantees (its timers never fire early) and an upper bound that only a
# hang can miss.
program=$1
expected=$2
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
start=$(date +%s%N)
"$program" >"$out" || { echo "$program exited with status $?"; exit 1; }
end=$(date +%s%N)
if ! cmp -s "$out" "$expected"; then
    echo "output differs from $expected:"
    diff "$expected" "$out"
    exit 1
fi
elapsed_ms=$(( (end - start) / 1000000 ))
if [ -n "$3" ] && [ "$elapsed_ms" -lt "$3" ]; then
    echo "ran for ${elapsed_ms} ms, expected at least $3 ms"
    exit 1
fi
if [ -n "$4" ] && [ "$elapsed_ms" -ge "$4" ]; then
    echo "ran for ${elapsed_ms} ms, expected less than $4 ms"
    exit 1
fi
echo "ok: output matches $expected (${elapsed_ms} ms)"
