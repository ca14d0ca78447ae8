#!/usr/bin/env python3
"""tools/no-io-uring (tools/no_io_uring.cpp): a command run under it is refused io_uring as a
default container refuses it, and nothing else changes.

Usage: no_io_uring_test.py LAUNCHER [ISSUE_PROGRAM SERVICE]. A probe (Python, ctypes) makes the three io_uring system
calls and prints each one's errno; run under the launcher it must see EPERM (or the --errno
asked for) from all three, in a thread and in a grandchild process too, while outside it
io_uring_setup works on this machine (else the test is skipped: it would prove nothing). The
launcher passes on the command's arguments, environment and exit status, and says what is
wrong when it cannot run a command (127, 126) or is called wrongly (2). Given the two
examples, an eddy program under the launcher runs on the readiness driver (issue_program
prints its 1053, and stderr says once why io_uring is not used), and one that requires
io_uring (service, EDDY_DRIVER=io_uring through RuntimeConfig::from_env) stops with the
reason.
"""
import errno
import os
import stat
import subprocess
import sys
import tempfile
import unittest

LAUNCHER = None  # set from argv in __main__
EXAMPLES = []  # issue_program, service: from argv, when given

PROBE = r"""
import ctypes, sys, threading
libc = ctypes.CDLL(None, use_errno=True)

def probe():
    params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
    results = []
    fd = libc.syscall(425, 4, params)  # io_uring_setup(4 entries)
    results.append(0 if fd >= 0 else ctypes.get_errno())
    # io_uring_enter and io_uring_register on fd -1: EBADF or EINVAL when allowed, the
    # filter's errno when refused.
    for nr in (426, 427):
        libc.syscall(nr, -1, 0, 0, 0, 0, 0)
        results.append(ctypes.get_errno())
    return results

if sys.argv[1:] == ["thread"]:
    out = []
    t = threading.Thread(target=lambda: out.extend(probe()))
    t.start()
    t.join()
else:
    out = probe()
print(" ".join(map(str, out)))
"""


def run(*args, env=None):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60, env=env)


class NoIoUringTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.probe = os.path.join(cls.dir.name, "probe.py")
        with open(cls.probe, "w") as f:
            f.write(PROBE)
        outside = run(sys.executable, cls.probe)
        if outside.returncode != 0 or outside.stdout.split()[0] != "0":
            raise unittest.SkipTest("io_uring_setup is refused here already (%s): the launcher's effect "
                                    "cannot be told apart" % outside.stdout.strip())
        # Outside the launcher the other two calls reach the kernel, which finds their
        # arguments wrong (EBADF, EINVAL) rather than the calls refused.
        refused = {str(errno.EPERM), str(errno.EACCES), str(errno.ENOSYS)}
        assert not refused & set(outside.stdout.split()[1:]), outside.stdout

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def probe_under(self, *launcher_args, mode=None):
        cmd = [LAUNCHER, *launcher_args, sys.executable, self.probe] + ([mode] if mode else [])
        r = run(*cmd)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [int(x) for x in r.stdout.split()]

    def test_all_three_calls_are_refused_with_eperm(self):
        self.assertEqual(self.probe_under(), [errno.EPERM] * 3)

    def test_errno_can_be_chosen(self):
        self.assertEqual(self.probe_under("--errno", "ENOSYS"), [errno.ENOSYS] * 3)
        self.assertEqual(self.probe_under("--errno", "EACCES"), [errno.EACCES] * 3)
        self.assertEqual(self.probe_under("--errno", "EPERM", "--"), [errno.EPERM] * 3)

    def test_threads_and_child_processes_are_refused_too(self):
        self.assertEqual(self.probe_under(mode="thread"), [errno.EPERM] * 3)
        r = run(LAUNCHER, "sh", "-c", '"$0" "$1"', sys.executable, self.probe)
        self.assertEqual(r.stdout.split(), [str(errno.EPERM)] * 3, r.stderr)

    def test_arguments_environment_and_status_pass_through(self):
        env = dict(os.environ, NO_IO_URING_TEST="value seen")
        r = run(LAUNCHER, "sh", "-c", 'printf "%s|%s|%s" "$1" "$2" "$NO_IO_URING_TEST"; exit 7', "sh",
                "one arg", "--errno", env=env)
        self.assertEqual(r.returncode, 7)
        self.assertEqual(r.stdout, "one arg|--errno|value seen")

    def test_a_missing_command_is_127_and_named(self):
        r = run(LAUNCHER, "no-such-command-here")
        self.assertEqual(r.returncode, 127)
        self.assertIn("no-io-uring: no-such-command-here: No such file or directory", r.stderr)

    def test_a_file_that_cannot_run_is_126(self):
        path = os.path.join(self.dir.name, "not-executable")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
        r = run(LAUNCHER, path)
        self.assertEqual(r.returncode, 126)
        self.assertIn("Permission denied", r.stderr)

    def test_usage_errors_are_2_with_the_reason(self):
        for args, why in [((), "no command given"), (("--errno",), "--errno needs a name"),
                          (("--errno", "EINVAL", "true"), "--errno takes EPERM, EACCES or ENOSYS"),
                          (("--verbose", "true"), "unknown option")]:
            r = run(LAUNCHER, *args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(why, r.stderr)
            self.assertIn("usage: no-io-uring", r.stderr)


class EddyUnderTheLauncherTest(unittest.TestCase):
    def setUp(self):
        if not EXAMPLES:
            self.skipTest("no examples given")

    def test_the_default_driver_falls_back_and_says_why_once(self):
        r = run(LAUNCHER, EXAMPLES[0])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "1053")
        self.assertEqual(r.stderr.count("io_uring is unavailable: permission denied"), 1, r.stderr)
        self.assertIn("using the readiness driver (epoll)", r.stderr)

    def test_io_uring_required_stops_with_the_reason(self):
        env = dict(os.environ, EDDY_DRIVER="io_uring", SERVICE_PORT="0")
        r = run(LAUNCHER, EXAMPLES[1], env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("io_uring is unavailable: permission denied", r.stderr)
        self.assertNotIn("listening=", r.stdout)


if __name__ == "__main__":
    LAUNCHER = os.path.abspath(sys.argv.pop(1))
    while len(sys.argv) > 1 and not sys.argv[1].startswith("-") and os.path.exists(sys.argv[1]):
        EXAMPLES.append(os.path.abspath(sys.argv.pop(1)))
    unittest.main()
