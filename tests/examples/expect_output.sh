#!/bin/sh
# tests/examples/expect_output.sh PROGRAM EXPECTED: runs PROGRAM and fails unless its
# standard output is exactly the line EXPECTED.
out=$("$1") || { echo "$1 exited with status $?"; exit 1; }
if [ "$out" != "$2" ]; then
    echo "expected '$2', got '$out'"
    exit 1
fi
echo "ok: $out"
