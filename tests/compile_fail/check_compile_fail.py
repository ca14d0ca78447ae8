#!/usr/bin/env python3
"""Checks that a C++ snippet does NOT compile, and that the compiler says the expected thing.

    check_compile_fail.py --source FILE --expect REGEX [--max-lines N]
                          [--expect-verdict VERDICT] -- COMPILER [FLAGS...]

Runs `COMPILER FLAGS... -fsyntax-only -fdiagnostics-color=never FILE` (one compile, no
object file) and gives one of these verdicts on what it printed (stdout and stderr together):

    ok         the compile failed, REGEX matches the diagnostics (re.search, multi-line),
               and they are at most N non-empty lines long (when --max-lines is given)
    compiled   the snippet compiled: the check it stands for is gone
    mismatch   the compile failed, but not with the expected message
    too-long   the right message, buried in more than N lines

Exit status 0 when the verdict is the wanted one: `ok`, unless --expect-verdict names
another. That option is how the harness tests itself (tests/compile_fail/meson.build): a
snippet that compiles, checked with --expect-verdict compiled, passes only if the harness
calls it a failure, so it cannot pass silently. Exit status 1 for any other verdict, 2 when
the compiler could not be run at all (then no verdict means anything). On failure the
command, the verdict and the diagnostics are printed, so the test log says what happened.

COMPILER and FLAGS come from meson: the build's C++ compiler (cmd_array: it may be a
ccache wrapper), eddy's include directories (source and build trees: some headers are
generated) and the language standard (-std=...).
"""
import argparse
import re
import subprocess
import sys

VERDICTS = ("ok", "compiled", "mismatch", "too-long")
TIMEOUT_S = 300  # a loaded CI machine; one -fsyntax-only of eddy's headers takes seconds


def verdict(returncode, output, expect, max_lines):
    """The verdict on one compile (see the module's docstring)."""
    if returncode == 0:
        return "compiled"
    if not re.search(expect, output, re.MULTILINE):
        return "mismatch"
    lines = [line for line in output.splitlines() if line.strip()]
    if max_lines is not None and len(lines) > max_lines:
        return "too-long"
    return "ok"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True, help="the C++ file that must not compile")
    parser.add_argument("--expect", required=True, help="a regex the diagnostics must match")
    parser.add_argument("--max-lines", type=int, default=None,
                        help="at most this many non-empty lines of diagnostics")
    parser.add_argument("--expect-verdict", choices=VERDICTS, default="ok",
                        help="the verdict that passes (the harness's own tests)")
    parser.add_argument("compiler", nargs=argparse.REMAINDER,
                        help="-- then the compiler command and its flags")
    args = parser.parse_args(argv)
    compiler = args.compiler[1:] if args.compiler[:1] == ["--"] else args.compiler
    if not compiler:
        parser.error("no compiler command after --")
    try:
        re.compile(args.expect)
    except re.error as e:
        parser.error(f"--expect is not a valid regex: {e}")

    command = compiler + ["-fsyntax-only", "-fdiagnostics-color=never", args.source]
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace", timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"check_compile_fail: could not run the compiler: {e}\n  {' '.join(command)}")
        return 2
    got = verdict(done.returncode, done.stdout, args.expect, args.max_lines)
    if got == args.expect_verdict:
        return 0
    explain = {
        "ok": "the compile failed with the expected message",
        "compiled": "the snippet compiled, but it must not",
        "mismatch": f"the compile failed, but the diagnostics do not match /{args.expect}/",
        "too-long": f"the expected message, but in more than {args.max_lines} lines of diagnostics",
    }
    print(f"check_compile_fail: FAILED: {explain[got]} (wanted: {args.expect_verdict})")
    print(f"command: {' '.join(command)}")
    print(f"exit status {done.returncode}; diagnostics:")
    print(done.stdout if done.stdout else "(none)")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
