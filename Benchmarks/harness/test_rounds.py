"""Tests of Suite.measure_rounds (figures measured in rounds with their baselines), with made-up
runs: no process is started.

    scripts/bench --self-test
"""

import contextlib
import io
import types
import unittest

from processes import BenchError
from report import busy_note
from suite import Suite, single


def suite(only=None):
    args = types.SimpleNamespace(bin_dir="/nonexistent", tools_dir=None, raw="rawbench", python="python3",
                                 quick=False, only=only)
    bench = Suite(args)
    bench.machine_busy = lambda: 3.0  # not the machine's: these tests measure nothing
    return bench


class MeasureRoundsTests(unittest.TestCase):
    def measure(self, bench, specs, runs):
        with contextlib.redirect_stderr(io.StringIO()):
            bench.measure_rounds("group", specs, runs)

    def test_each_round_runs_every_figure_once_in_an_order_turned_by_one(self):
        order = []

        def run(name, value):
            def one_run():
                order.append(name)
                return value + len(order)
            return one_run

        bench = suite()
        self.measure(bench, [single("a", "A", "msgs/s", run("a", 0)), single("b", "B", "msgs/s", run("b", 100)),
                             single("c", "C", "msgs/s", run("c", 200))], runs=3)
        self.assertEqual(order, ["a", "b", "c", "b", "c", "a", "c", "a", "b"])
        # Sample i of each figure is from round i, whatever its place in the round.
        self.assertEqual(bench.figures["a"]["samples"], [1, 6, 8])
        self.assertEqual(bench.figures["b"]["samples"], [102, 104, 109])
        self.assertEqual({bench.figures[key]["pairedIn"] for key in "abc"}, {"group"})

    def test_a_spec_that_fails_is_unavailable_and_the_others_go_on(self):
        def failing():
            raise BenchError("the sink did not start")

        bench = suite()
        self.measure(bench, [single("a", "A", "msgs/s", lambda: 1.0),
                             ({"b.p50": ("B p50", "µs", "p50", True), "b.p99": ("B p99", "µs", "p99", True)}, failing)],
                     runs=3)
        self.assertEqual(bench.figures["a"]["samples"], [1.0, 1.0, 1.0])
        self.assertEqual(bench.figures["b.p50"]["status"], "unavailable")
        self.assertEqual(bench.figures["b.p99"]["reason"], "the sink did not start")

    def test_only_runs_the_chosen_figures(self):
        bench = suite(only=["b"])
        self.measure(bench, [single("a", "A", "msgs/s", lambda: 1.0), single("b", "B", "msgs/s", lambda: 2.0)], runs=2)
        self.assertEqual(set(bench.figures), {"b"})

    def test_the_machines_load_is_sampled_before_each_group_and_a_busy_one_is_said(self):
        bench = suite()
        self.measure(bench, [single("a", "A", "msgs/s", lambda: 1.0)], runs=1)
        self.assertEqual(bench.busy, [{"before": "group", "percent": 3.0}])
        self.assertIsNone(busy_note(bench.busy))
        note = busy_note(bench.busy + [{"before": "rtt.pinned", "percent": 62.0}])
        self.assertIn("other processes used up to 62 % of it between measurements (before rtt.pinned)", note)

    def test_measure_many_records_figures_not_paired(self):
        bench = suite()
        with contextlib.redirect_stderr(io.StringIO()):
            bench.measure_many({"x.p50": ("X p50", "µs", "p50", True)}, 2, lambda: {"p50": 3.0})
        self.assertNotIn("pairedIn", bench.figures["x.p50"])
        self.assertEqual(bench.figures["x.p50"]["median"], 3.0)

    def test_a_field_with_several_samples_of_one_run_gives_each_of_them(self):
        # The idle mesh: one run, one CPU-per-exchange sample per idle window, and one CPU figure.
        bench = suite()
        with contextlib.redirect_stderr(io.StringIO()):
            bench.measure_many({"m.exchange": ("M exchange", "µs", "exchange", True),
                                "m.cpu": ("M CPU", "%", "cpu", True)},
                               1, lambda: {"exchange": [61.0, 70.0, 64.0, 66.0], "cpu": 10.0})
        self.assertEqual(bench.figures["m.exchange"]["samples"], [61.0, 70.0, 64.0, 66.0])
        self.assertEqual(bench.figures["m.exchange"]["median"], 65.0)
        self.assertEqual(bench.figures["m.cpu"]["samples"], [10.0])


if __name__ == "__main__":
    unittest.main()
