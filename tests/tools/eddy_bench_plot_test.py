#!/usr/bin/env python3
"""tools/eddy-bench --from-json and --plot on synthetic results; no benchmark runs.

The fixture builder writes a --json document (format 2) whose medians are known, with every
kind of cell: a ratio above and below 1 and exactly 1, an anchor whose runs all failed
("failed", no ratio), an anchor that lacks a benchmark ("-"), a benchmark with two figures
(timers), a lower-is-better figure (task_memory), and a benchmark name with '&' and '<' (the
table does not check names: it escapes them in the SVG's labels and title). The table printed
must be the one written out below by hand; the SVG must parse, hold one bar per ratio, "n/a"
per missing ratio, the parity line where the bars start (ratio 1.0), a log2 axis. A fake run
(shell scripts in place of the benchmark programs and anchors) checks that --from-json prints
what the run printed, and that fanout_pubsub's rows come from its load client's line and the
server's stats line at SIGTERM (the scheduling-delay rows only where the server has them),
and that --quick loads the servers for 1 s and the note under the table says so.
"""
import json
import math
import os
import stat
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EDDY_BENCH = os.path.join(ROOT, "tools", "eddy-bench")
SVG = "{http://www.w3.org/2000/svg}"
ODD = "a&b<c>"  # a benchmark name to escape

# (bench, workers, runtime) -> {figure key: median}; an anchor absent from a (bench, workers)
# has no result there (all its runs failed, or it lacks the benchmark: LACKING).
MEDIANS = {
    ("spawn_many", 1, "eddy"): {"rate": 15588000}, ("spawn_many", 1, "tokio"): {"rate": 4704000},
    ("spawn_many", 1, "asio"): {"rate": 5000000},
    ("spawn_many", 2, "eddy"): {"rate": 7820000}, ("spawn_many", 2, "tokio"): {"rate": 4060000},
    ("timers", 1, "eddy"): {"rate": 900000, "overhead_ms": 29.78},
    ("timers", 1, "tokio"): {"rate": 450000, "overhead_ms": 183.14},
    ("timers", 2, "eddy"): {"rate": 1200000, "overhead_ms": 40.0},
    ("timers", 2, "tokio"): {"rate": 600000, "overhead_ms": 20.0},
    ("task_memory", 1, "eddy"): {"bytes_per_task": 221}, ("task_memory", 1, "tokio"): {"bytes_per_task": 208},
    ("task_memory", 2, "eddy"): {"bytes_per_task": 210}, ("task_memory", 2, "tokio"): {"bytes_per_task": 208},
    (ODD, 1, "eddy"): {"rate": 1000}, (ODD, 1, "tokio"): {"rate": 4000}, (ODD, 1, "asio"): {"rate": 1000},
    (ODD, 2, "eddy"): {"rate": 2000}, (ODD, 2, "tokio"): {"rate": 2000}, (ODD, 2, "asio"): {"rate": 8000},
}
LACKING = {"asio": ["timers", "task_memory"]}
BENCHES = ["spawn_many", "timers", "task_memory", ODD]
DATE = "2026-11-25"

# The table eddy-bench must print for MEDIANS, worked out by hand.
EXPECTED_TABLE = """\
| bench | figure | workers | eddy | tokio | asio | vs tokio | vs asio |
|---|---|---|---|---|---|---|---|
| spawn_many | ops/s | 1 | 15.59 M | 4.70 M | 5.00 M | 3.31x | 3.12x |
| spawn_many | ops/s | 2 | 7.82 M | 4.06 M | failed | 1.93x | - |
| timers | timers/s | 1 | 900.0 k | 450.0 k | - | 2.00x | - |
| timers | timers/s | 2 | 1.20 M | 600.0 k | - | 2.00x | - |
| timers | overhead ms | 1 | 29.8 | 183.1 | - | 6.15x | - |
| timers | overhead ms | 2 | 40.0 | 20.0 | - | 0.50x | - |
| task_memory | bytes/task | 1 | 221 | 208 | - | 0.94x | - |
| task_memory | bytes/task | 2 | 210 | 208 | - | 0.99x | - |
| a&b<c> | ops/s | 1 | 1.0 k | 4.0 k | 1.0 k | 0.25x | 1.00x |
| a&b<c> | ops/s | 2 | 2.0 k | 2.0 k | 8.0 k | 1.00x | 0.25x |
"""


def spread(v):
    """Three runs whose median is v."""
    if isinstance(v, int):
        return [v - 7, v, v + 11]
    return [v * 0.9, v, v * 1.2]


def build_results(medians=MEDIANS, runtimes=("eddy", "tokio", "asio"), legacy=False):
    """A --json document with three runs per (bench, workers, runtime) of `medians`, the
    runtimes alternating run by run as eddy-bench does; legacy: the bare list of results."""
    results = []
    for b in BENCHES:
        for w in (1, 2):
            for rep in range(3):
                for n in runtimes:
                    figures = medians.get((b, w, n))
                    if figures:
                        r = {k: spread(v)[rep] for k, v in figures.items()}
                        results.append(dict(r, ops=1000, secs=0.5, bench=b, runtime=n, workers=w))
    if legacy:
        return results
    return {"format": 2, "date": DATE, "benches": BENCHES, "workers": [1, 2], "reps": 3,
            "runtimes": list(runtimes), "lacking": {n: bs for n, bs in LACKING.items() if n in runtimes},
            "absent": [], "conns": 64, "msgs": 2000, "failures": 0, "results": results}


def eddy_bench(*args, check=True):
    out = subprocess.run([sys.executable, EDDY_BENCH] + list(args), capture_output=True, text=True, timeout=120)
    if check and out.returncode != 0:
        raise AssertionError("eddy-bench %s: status %d\n%s" % (" ".join(args), out.returncode, out.stderr))
    return out


def table_of(stdout):
    """The markdown table of eddy-bench's output (its lines up to the blank line)."""
    return stdout.split("\n\n")[0] + "\n"


class Fixture(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def write_json(self, doc, name="results.json"):
        with open(self.path(name), "w") as f:
            json.dump(doc, f)
        return self.path(name)

    def render(self, doc, *extra):
        """--from-json of `doc` with --plot: (stdout, SVG text, parsed SVG root)."""
        out = eddy_bench("--from-json", self.write_json(doc), "--plot", self.path("plot.svg"), *extra)
        with open(self.path("plot.svg"), encoding="utf-8") as f:
            svg = f.read()
        return out.stdout, svg, ET.fromstring(svg.encode("utf-8"))


class TableTest(Fixture):
    def test_table_is_the_one_computed_by_hand(self):
        stdout, _, _ = self.render(build_results())
        self.assertEqual(table_of(stdout), EXPECTED_TABLE)
        note = stdout.split("\n\n")[1]
        self.assertTrue(note.startswith("medians of 3 runs each"), note)
        self.assertIn("not implemented (shown as -): asio: timers, task_memory", note)

    def test_legacy_list_gives_the_same_table(self):
        stdout, svg, _ = self.render(build_results(legacy=True))
        self.assertEqual(table_of(stdout), EXPECTED_TABLE)
        self.assertIn("undated", svg)

    def test_bench_and_workers_filter(self):
        out = eddy_bench("--from-json", self.write_json(build_results()), "spawn_many", "--workers", "2")
        lines = table_of(out.stdout).splitlines()
        self.assertEqual(lines[2:], ["| spawn_many | ops/s | 2 | 7.82 M | 4.06 M | failed | 1.93x | - |"])
        self.assertNotIn("not implemented", out.stdout)  # asio lacks only benchmarks left out

    def test_json_round_trip(self):
        """--from-json with --json writes a document that renders the same table again."""
        again = self.path("again.json")
        first = eddy_bench("--from-json", self.write_json(build_results(legacy=True)), "--json", again)
        self.assertEqual(eddy_bench("--from-json", again).stdout, first.stdout)

    def test_not_results(self):
        out = eddy_bench("--from-json", self.write_json({"hello": 1}), check=False)
        self.assertEqual(out.returncode, 2)

    def test_no_anchor_no_plot(self):
        only_eddy = {k: v for k, v in MEDIANS.items() if k[2] == "eddy"}
        out = eddy_bench("--from-json", self.write_json(build_results(only_eddy, runtimes=("eddy",))),
                         "--plot", self.path("none.svg"), check=False)
        self.assertEqual(out.returncode, 1)
        self.assertFalse(os.path.exists(self.path("none.svg")))


class PlotTest(Fixture):
    def setUp(self):
        super().setUp()
        self.stdout, self.svg, self.root = self.render(build_results())
        self.bars = [e for e in self.root.iter(SVG + "rect") if e.get("class") == "bar"]
        self.parity = [e for e in self.root.iter(SVG + "line") if e.get("class") == "parity"]

    def texts(self, cls):
        return [e for e in self.root.iter(SVG + "text") if e.get("class") == cls]

    def expected_ratios(self):
        """(anchor, ratio cell) of every row of EXPECTED_TABLE."""
        cells = []
        for line in EXPECTED_TABLE.splitlines()[2:]:
            c = [x.strip() for x in line.strip("|").split("|")]
            cells += [("tokio", c[-2]), ("asio", c[-1])]
        return cells

    def test_one_bar_per_ratio(self):
        present = [(n, v) for n, v in self.expected_ratios() if v != "-"]
        self.assertEqual(len(self.bars), len(present))
        self.assertEqual(sorted((b.get("data-anchor"), "%.2fx" % float(b.get("data-ratio"))) for b in self.bars),
                         sorted(present))
        # The value at each bar's end.
        self.assertEqual(sorted(t.text for t in self.texts("value")), sorted(v for _, v in present))
        self.assertEqual(len({b.get("fill") for b in self.bars}), 2)  # one fill per anchor

    def test_missing_ratios_show_na(self):
        missing = [n for n, v in self.expected_ratios() if v == "-"]
        na = self.texts("na")
        self.assertEqual(sorted(t.get("data-anchor") for t in na), sorted(missing))
        self.assertTrue(all(t.text == "n/a" for t in na))

    def test_parity_line_at_ratio_one(self):
        self.assertEqual(len(self.parity), 1)
        line = self.parity[0]
        px = float(line.get("x1"))
        self.assertEqual(float(line.get("x2")), px)
        # Bars start at 1.0: those above it begin at the line, those below end at it.
        for b in self.bars:
            r, x, w = float(b.get("data-ratio")), float(b.get("x")), float(b.get("width"))
            self.assertAlmostEqual(x if r >= 1 else x + w, px, delta=0.02, msg=b.get("data-row"))
        ticks = {t.text: float(t.get("x")) for t in self.texts("tick")}
        self.assertAlmostEqual(ticks["1x"], px, delta=0.02)
        self.assertEqual([t.text for t in self.texts("parity-label")], ["parity"])

    def test_log2_axis(self):
        """Ticks at powers of 2 are evenly spaced, and a bar is as long as |log2 ratio| times
        that spacing."""
        ticks = {t.text: float(t.get("x")) for t in self.texts("tick")}
        doubling = ticks["2x"] - ticks["1x"]
        self.assertGreater(doubling, 0)
        for lo, hi in (("0.25x", "0.5x"), ("0.5x", "1x"), ("2x", "4x"), ("4x", "8x")):
            self.assertAlmostEqual(ticks[hi] - ticks[lo], doubling, delta=0.02)
        for b in self.bars:
            r = float(b.get("data-ratio"))
            self.assertAlmostEqual(float(b.get("width")), abs(math.log2(r)) * doubling, delta=0.02)

    def test_labels_and_title_escaped(self):
        self.assertNotIn(ODD, self.svg)
        self.assertIn("a&amp;b&lt;c&gt;", self.svg)
        labels = [t.text for t in self.texts("row-label")]
        self.assertEqual(labels[-2:], [ODD + " · ops/s · 1 worker", ODD + " · ops/s · 2 workers"])
        self.assertEqual(len(labels), len(EXPECTED_TABLE.splitlines()) - 2)
        title = self.texts("title")[0].text
        self.assertIn(DATE, title)
        command = " ".join(t.text for t in self.texts("command"))
        for b in BENCHES:
            self.assertIn(b, command)

    def test_legend_and_footnote(self):
        legend = [e for e in self.root.iter(SVG + "rect") if e.get("class") == "legend"]
        self.assertEqual(len(legend), 2)
        self.assertIn("ratio > 1: eddy better", self.texts("footnote")[0].text)

    def test_deterministic(self):
        _, svg, _ = self.render(build_results())
        self.assertEqual(svg, self.svg)


def write_script(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


class FakeRunTest(Fixture):
    """A real eddy-bench run, of shell scripts that print result lines: --from-json of its
    --json file prints the same output and draws the same plot."""

    def test_from_json_prints_what_the_run_printed(self):
        build, anchors = self.path("build"), self.path("anchors")
        # eddy's programs take --workers N; the anchors take BENCH --workers N.
        write_script(os.path.join(build, "benchmarks", "spawn_many"),
                     'echo "bench=spawn_many runtime=eddy workers=$2 ops=1000 secs=0.001 rate=$((3000000 * $2))"\n')
        write_script(os.path.join(build, "benchmarks", "timers"),
                     'echo "overhead_ms=12.5"\n'
                     'echo "bench=timers runtime=eddy workers=$2 ops=1000 secs=0.01 rate=100000"\n')
        write_script(os.path.join(anchors, "tokio-bench", "target", "release", "tokio-bench"),
                     'echo "overhead_ms=50.0"\n'
                     'echo "bench=$1 runtime=tokio workers=$3 ops=1000 secs=0.01 rate=$((1000000 * $3))"\n')
        write_script(os.path.join(anchors, "asio-bench", "asio-bench"),
                     'if [ "$1" = timers ]; then echo "unknown benchmark: timers" >&2; exit 2; fi\n'
                     'echo "bench=$1 runtime=asio workers=$3 ops=1000 secs=0.01 rate=4000000"\n')
        run = eddy_bench("--build", build, "--anchors", anchors, "--reps", "2", "spawn_many", "timers",
                         "--json", self.path("run.json"), "--plot", self.path("run.svg"))
        self.assertIn("| spawn_many | ops/s | 1 | 3.00 M | 1.00 M | 4.00 M | 3.00x | 0.75x |", run.stdout)
        self.assertIn("| timers | overhead ms | 2 | 12.5 | 50.0 | - | 4.00x | - |", run.stdout)
        again = eddy_bench("--from-json", self.path("run.json"), "--plot", self.path("again.svg"))
        self.assertEqual(again.stdout, run.stdout)
        with open(self.path("run.svg")) as f, open(self.path("again.svg")) as g:
            self.assertEqual(f.read(), g.read())

    def write_pubsub(self, build, sched):
        """A chat_server that prints its stats line at SIGTERM (with the scheduling delay when
        `sched`) and a pubsub_load whose rate is the room size times 1000."""
        stats = "clients=200 dropped=0 lines_in=10 lines_out=200 lagged=0 workers=$2"
        if sched:
            stats += " sched_delay_p50_us=5 sched_delay_p99_us=40 sched_delay_max_us=900"
        write_script(os.path.join(build, "examples", "chat_server"),
                     'trap \'echo "chat_server: SIGTERM, shut down; 0 connections closed"; '
                     'echo "chat_server stats: %s"; exit 0\' TERM\n'
                     'echo "chat_server runtime=eddy workers=$2 listening=127.0.0.1:$4"\n'
                     'while :; do sleep 0.02; done\n' % stats)
        write_script(os.path.join(build, "benchmarks", "pubsub_load"),
                     'echo "bench=fanout_pubsub runtime=$8 workers=${10} ops=$(($6 * 3000)) secs=3.0000 '
                     'rate=$(($6 * 1000)) room_size=$6 clients=$4 window=1 size=64 lines_sent=10 sent_min=1 '
                     'sent_max=1 p50_us=10.0 p99_us=$(($6 * 10)).5 dropped=0 errors=0"\n')

    def test_fanout_pubsub_reads_the_stats_line(self):
        build = self.path("build")
        self.write_pubsub(build, sched=True)
        run = eddy_bench("--build", build, "--no-anchors", "--reps", "1", "--workers", "1", "fanout_pubsub",
                         "--json", self.path("run.json"))
        table = table_of(run.stdout)
        for row in ["| fanout_pubsub | lines/s room 20 | 1 | 20.0 k |",
                    "| fanout_pubsub | lines/s room 100 | 1 | 100.0 k |",
                    "| fanout_pubsub | dropped room 20 | 1 | 0 |",
                    "| fanout_pubsub | ack p99 us room 100 | 1 | 1000.5 |",
                    "| fanout_pubsub | sched p99 us room 20 | 1 | 40.0 |",
                    "| fanout_pubsub | sched max us room 100 | 1 | 900.0 |"]:
            self.assertIn(row, table)
        self.assertIn("cpu us/line room 20", table)
        with open(self.path("run.json")) as f:
            (result,) = json.load(f)["results"]
        self.assertEqual(result["r20_server_lines_out"], 200)
        self.assertEqual(result["r100_ops"], 300000)

    def test_fanout_pubsub_without_scheduling_delay_has_no_such_rows(self):
        build = self.path("build")
        self.write_pubsub(build, sched=False)
        run = eddy_bench("--build", build, "--no-anchors", "--reps", "1", "--workers", "1", "fanout_pubsub")
        self.assertIn("| fanout_pubsub | lines/s room 20 | 1 | 20.0 k |", run.stdout)
        self.assertNotIn("sched", table_of(run.stdout))

    def test_quick_loads_one_second_and_says_so(self):
        build = self.path("build")
        self.write_pubsub(build, sched=False)
        args_log = self.path("pubsub_args")
        with open(os.path.join(build, "benchmarks", "pubsub_load")) as f:
            script = f.read()
        write_script(os.path.join(build, "benchmarks", "pubsub_load"),
                     'echo "$@" >>%s\n' % args_log + script.split("\n", 1)[1])
        run = eddy_bench("--build", build, "--no-anchors", "--quick", "--workers", "1",
                         "fanout_pubsub", "--json", self.path("run.json"))
        with open(args_log) as f:
            calls = f.read().splitlines()
        self.assertEqual(len(calls), 2 * 4)  # --quick: 2 runs, each 2 room sizes x (saturated, paced)
        for call in calls:
            self.assertTrue(call.endswith("--secs 1"), call)
        self.assertIn("window 1, 1 s;", run.stdout)
        self.assertIn("medians of 2 runs", run.stdout)
        again = eddy_bench("--from-json", self.path("run.json"))
        self.assertEqual(again.stdout, run.stdout)

    def test_driver_epoll_runs_eddy_under_the_launcher(self):
        build = self.path("build")
        write_script(os.path.join(build, "benchmarks", "spawn_many"),
                     'echo "bench=spawn_many runtime=eddy workers=$2 ops=1000 secs=0.001 rate=1000000"\n')
        calls = self.path("launched")
        write_script(os.path.join(build, "tools", "no-io-uring"), 'echo "$@" >>%s\nexec "$@"\n' % calls)
        run = eddy_bench("--build", build, "--no-anchors", "--reps", "3", "--workers", "1", "--driver", "epoll",
                         "spawn_many", "--json", self.path("run.json"))
        with open(calls) as f:
            launched = f.read().splitlines()
        self.assertEqual(launched, [os.path.join(build, "benchmarks", "spawn_many") + " --workers 1"] * 3)
        self.assertIn("eddy on its readiness driver (epoll", run.stdout)
        self.assertIn("| spawn_many | ops/s | 1 | 1.00 M |", run.stdout)
        self.assertEqual(eddy_bench("--from-json", self.path("run.json")).stdout, run.stdout)
        os.remove(os.path.join(build, "tools", "no-io-uring"))
        missing = eddy_bench("--build", build, "--no-anchors", "--driver", "epoll", "spawn_many", check=False)
        self.assertEqual(missing.returncode, 2)
        self.assertIn("--driver epoll needs", missing.stderr)

    def test_driver_both_alternates_the_two_drivers_and_adds_their_ratio(self):
        build = self.path("build")
        # The launcher marks what it runs; the program reports twice the rate when marked.
        write_script(os.path.join(build, "benchmarks", "spawn_many"),
                     'rate=1000000; [ -n "$UNDER_LAUNCHER" ] && rate=2000000\n'
                     'echo "bench=spawn_many runtime=eddy workers=$2 ops=1000 secs=0.001 rate=$rate"\n')
        calls = self.path("launched")
        write_script(os.path.join(build, "tools", "no-io-uring"),
                     'echo "$@" >>%s\nUNDER_LAUNCHER=1 exec "$@"\n' % calls)
        run = eddy_bench("--build", build, "--no-anchors", "--reps", "3", "--workers", "1", "--driver", "both",
                         "spawn_many", "--json", self.path("run.json"), "--plot", self.path("both.svg"))
        with open(calls) as f:
            self.assertEqual(len(f.read().splitlines()), 3)  # eddy-epoll's runs only
        self.assertIn("| bench | figure | workers | eddy | eddy-epoll | epoll vs io_uring |", run.stdout)
        self.assertIn("| spawn_many | ops/s | 1 | 1.00 M | 2.00 M | 2.00x |", run.stdout)
        self.assertIn("as eddy-epoll, on its readiness driver", run.stdout)
        self.assertEqual(eddy_bench("--from-json", self.path("run.json")).stdout, run.stdout)
        with open(self.path("both.svg")) as f:
            self.assertIn('data-anchor="epoll vs io_uring" data-ratio="2"', f.read())

    def test_load_secs_must_be_above_zero(self):
        bad = eddy_bench("--load-secs", "0", "--no-anchors", check=False)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--load-secs must be above 0", bad.stderr)


if __name__ == "__main__":
    unittest.main()
