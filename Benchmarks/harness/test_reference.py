"""Tests of the comparison with the reference run (reference.py), on made-up results: no benchmark runs.

    scripts/bench --self-test      (python3 -B -m unittest discover -s Benchmarks/harness -p 'test_*.py')
"""

import contextlib
import io
import json
import tempfile
import unittest
from pathlib import Path

import reference
from stats import summarize

TITLES = {
    "pk.tput.100": ("PeerKit 100 B one-way, broadcast", "msgs/s", False),
    "zmq.tput.100.bytes": ("pyzmq PUSH/PULL 100 B", "msgs/s", False),
    "pk.rtt.pinned.p50": ("PeerKit request/reply p50, pinned", "µs", True),
    "zmq.rtt.bytes.pinned.p50": ("pyzmq REQ/REP p50, pinned", "µs", True),
    "nio.rtt.loop.pinned.p50": ("bare NIO RTT p50, one event loop, pinned", "µs", True),
    "raw.rtt.pinned.p50": ("raw RTT p50, pinned", "µs", True),
}


def result(samples, stamp="20261127T000000Z", commit="abc1234", quick=False, rounds=None):
    """A results file as bench.py writes it, with the given samples per figure key; with `rounds`,
    every figure was measured in the rounds of that group (Suite.measure_rounds)."""
    figures = {}
    for key, values in samples.items():
        title, unit, lower = TITLES[key]
        figures[key] = {"title": title, "unit": unit, "status": "ok", "lowerIsBetter": lower, **summarize(values)}
        if rounds is not None:
            figures[key]["pairedIn"] = rounds
    return {"timestamp": stamp, "commit": commit, "machine": {}, "runs": 3, "quick": quick, "figures": figures}


# The reference: PeerKit 100 B at 180k (175–185k), pyzmq at 600k (590–610k): 0.30×, spread about 5 %.
# Request/reply 58 µs (56–60) against pyzmq's 30 µs (29–31): 1.93×, spread about 10 %.
REFERENCE_RUN = result({"pk.tput.100": [175_000, 180_000, 185_000],
                        "zmq.tput.100.bytes": [590_000, 600_000, 610_000],
                        "pk.rtt.pinned.p50": [56, 58, 60],
                        "zmq.rtt.bytes.pinned.p50": [29, 30, 31]}, stamp="20261121T000000Z", commit="08d979d")


def reference_of(run):
    return reference.updated_reference({"format": reference.FORMAT, "runs": {}, "ratios": {}}, run)


def verdicts(ref, run):
    rows, _ = reference.compare(ref, run)
    return {key: mark for key, _, _, mark, *_ in rows}


class ComparisonTests(unittest.TestCase):
    def test_a_throughput_ratio_that_fell_beyond_the_spread_is_flagged(self):
        # Issue 34's 100 B regression: 180k → 135k while pyzmq stayed at 600k (−25 %).
        now = result({"pk.tput.100": [132_000, 135_000, 138_000], "zmq.tput.100.bytes": [590_000, 600_000, 610_000]})
        self.assertEqual(verdicts(reference_of(REFERENCE_RUN), now)["pk.tput.100 / pyzmq"], "worse")

    def test_a_move_within_the_runs_spread_is_not_flagged(self):
        # 4 % lower, both figures moving by as much between their own runs: noise.
        now = result({"pk.tput.100": [165_000, 173_000, 181_000], "zmq.tput.100.bytes": [585_000, 600_000, 615_000]})
        self.assertEqual(verdicts(reference_of(REFERENCE_RUN), now)["pk.tput.100 / pyzmq"], "")

    def test_a_noisy_run_widens_what_is_allowed(self):
        # 20 % lower, but this run's own samples spread over 50 %: not flagged.
        now = result({"pk.tput.100": [100_000, 144_000, 190_000], "zmq.tput.100.bytes": [590_000, 600_000, 610_000]})
        self.assertEqual(verdicts(reference_of(REFERENCE_RUN), now)["pk.tput.100 / pyzmq"], "")

    def test_a_time_ratio_that_rose_is_worse_and_one_that_fell_is_better(self):
        # Issue 34's request/reply: 58 → 115 µs against the same pyzmq.
        slower = result({"pk.rtt.pinned.p50": [112, 115, 118], "zmq.rtt.bytes.pinned.p50": [29, 30, 31]})
        faster = result({"pk.rtt.pinned.p50": [28, 29, 30], "zmq.rtt.bytes.pinned.p50": [29, 30, 31]})
        ref = reference_of(REFERENCE_RUN)
        self.assertEqual(verdicts(ref, slower)["pk.rtt.pinned.p50 / pyzmq"], "worse")
        self.assertEqual(verdicts(ref, faster)["pk.rtt.pinned.p50 / pyzmq"], "better")

    def test_ratios_not_figures_are_compared(self):
        # A machine twice as slow moves both figures alike: the ratio stands and nothing is flagged.
        slow_machine = result({"pk.tput.100": [88_000, 90_000, 92_000], "zmq.tput.100.bytes": [295_000, 300_000, 305_000]})
        self.assertEqual(verdicts(reference_of(REFERENCE_RUN), slow_machine)["pk.tput.100 / pyzmq"], "")
        # The baseline faster and PeerKit the same: the ratio fell, and that is flagged.
        faster_baseline = result({"pk.tput.100": [175_000, 180_000, 185_000],
                                  "zmq.tput.100.bytes": [790_000, 800_000, 810_000]})
        self.assertEqual(verdicts(reference_of(REFERENCE_RUN), faster_baseline)["pk.tput.100 / pyzmq"], "worse")

    def test_the_range_of_a_ratio_is_min_over_max_to_max_over_min(self):
        entry = reference.ratio_entries(REFERENCE_RUN)["pk.tput.100 / pyzmq"]
        self.assertAlmostEqual(entry["value"], 0.3)
        self.assertAlmostEqual(entry["low"], 175_000 / 610_000)
        self.assertAlmostEqual(entry["high"], 185_000 / 590_000)

    def test_a_figure_measured_once_has_no_spread_of_its_own(self):
        ref = reference_of(result({"pk.tput.100": [180_000], "zmq.tput.100.bytes": [600_000]}))
        now = result({"pk.tput.100": [178_000], "zmq.tput.100.bytes": [600_000]})
        self.assertEqual(verdicts(ref, now)["pk.tput.100 / pyzmq"], "worse")

    def test_the_report_names_each_regression(self):
        now = result({"pk.tput.100": [132_000, 135_000, 138_000], "zmq.tput.100.bytes": [590_000, 600_000, 610_000],
                      "pk.rtt.pinned.p50": [56, 58, 60], "zmq.rtt.bytes.pinned.p50": [29, 30, 31]})
        text, worse = reference.markdown(reference_of(REFERENCE_RUN), now, "reference.json")
        self.assertEqual(worse, ["PeerKit 100 B one-way, broadcast / pyzmq"])
        self.assertIn("REGRESSION: 1 ratio fell", text)
        self.assertIn("| PeerKit 100 B one-way, broadcast / pyzmq | 0.30× (0.29–0.31) | 0.23× (0.22–0.23) | -25 % |", text)
        quiet, none = reference.markdown(reference_of(REFERENCE_RUN), REFERENCE_RUN, "reference.json")
        self.assertEqual(none, [])
        self.assertIn("No ratio fell by more than the runs' own spread (2 compared).", quiet)

    def test_a_ratio_between_two_baselines_that_moved_is_the_hosts_not_a_regression(self):
        # Bare NIO against raw C, 1.6× in the reference and 3.5× now: a machine whose context
        # switches cost Swift more than C. PeerKit's own ratio moved with it and is still flagged.
        before = result({"pk.rtt.pinned.p50": [56, 58, 60], "zmq.rtt.bytes.pinned.p50": [29, 30, 31],
                         "nio.rtt.loop.pinned.p50": [21, 22, 23], "raw.rtt.pinned.p50": [13.5, 14, 14.5]})
        now = result({"pk.rtt.pinned.p50": [145, 150, 155], "zmq.rtt.bytes.pinned.p50": [29, 30, 31],
                      "nio.rtt.loop.pinned.p50": [48, 50, 52], "raw.rtt.pinned.p50": [13.5, 14, 14.5]})
        ref = reference_of(before)
        self.assertEqual(verdicts(ref, now)["nio.rtt.loop.pinned.p50 / raw"], "worse")
        text, worse = reference.markdown(ref, now, "reference.json")
        self.assertEqual(set(worse), {"PeerKit request/reply p50, pinned / raw", "PeerKit request/reply p50, pinned / pyzmq"})
        self.assertIn("REGRESSION: 2 ratios fell", text)
        self.assertIn("HOST: 2 ratios between two baselines, with no PeerKit code in either figure, moved by more "
                      "than the runs' own spread as well: bare NIO RTT p50, one event loop, pinned / raw; bare NIO RTT "
                      "p50, one event loop, pinned / pyzmq.", text)
        # The same machine as the reference's: no HOST line.
        quiet, _ = reference.markdown(ref, before, "reference.json")
        self.assertNotIn("HOST:", quiet)


class RoundTests(unittest.TestCase):
    """Figures measured in rounds with their baselines: their ratios are taken round by round."""

    # The machine's load moving by ±33 % from round to round, PeerKit at 0.30× pyzmq in each.
    DRIFTING = {"pk.tput.100": [120_000, 180_000, 240_000], "zmq.tput.100.bytes": [400_000, 600_000, 800_000]}

    def test_a_paired_ratio_is_the_median_of_the_rounds_ratios(self):
        entry = reference.ratio_entries(result(self.DRIFTING, rounds="tput.100"))["pk.tput.100 / pyzmq"]
        self.assertTrue(entry["paired"])
        self.assertAlmostEqual(entry["value"], 0.3)
        self.assertAlmostEqual(entry["low"], 0.3)
        self.assertAlmostEqual(entry["high"], 0.3)
        # The same samples from separate runs: median ÷ median, min ÷ max to max ÷ min.
        apart = reference.ratio_entries(result(self.DRIFTING))["pk.tput.100 / pyzmq"]
        self.assertFalse(apart["paired"])
        self.assertAlmostEqual(apart["low"], 120_000 / 800_000)
        self.assertAlmostEqual(apart["high"], 240_000 / 400_000)

    def test_a_ten_percent_fall_under_a_drifting_load_is_flagged_only_when_paired(self):
        steady = {"pk.tput.100": [177_000, 180_000, 183_000], "zmq.tput.100.bytes": [590_000, 600_000, 610_000]}
        # 10 % lower in every round (0.27×), while the load moves as in DRIFTING.
        fallen = {"pk.tput.100": [108_000, 162_000, 216_000], "zmq.tput.100.bytes": [400_000, 600_000, 800_000]}
        paired_reference = reference_of(result(steady, rounds="tput.100"))
        self.assertEqual(verdicts(paired_reference, result(fallen, rounds="tput.100"))["pk.tput.100 / pyzmq"], "worse")
        self.assertEqual(verdicts(reference_of(result(steady)), result(fallen))["pk.tput.100 / pyzmq"], "")

    def test_figures_of_different_rounds_or_counts_are_not_paired(self):
        run = result(self.DRIFTING, rounds="tput.100")
        run["figures"]["zmq.tput.100.bytes"]["pairedIn"] = "another"
        self.assertFalse(reference.ratio_entries(run)["pk.tput.100 / pyzmq"]["paired"])
        run = result({"pk.tput.100": [120_000, 180_000], "zmq.tput.100.bytes": [400_000, 600_000, 800_000]}, rounds="tput.100")
        self.assertFalse(reference.ratio_entries(run)["pk.tput.100 / pyzmq"]["paired"])

    def test_the_report_says_a_range_is_by_round(self):
        text, _ = reference.markdown(reference_of(result(self.DRIFTING, rounds="tput.100")),
                                     result(self.DRIFTING, rounds="tput.100"), "reference.json")
        self.assertIn("| 0.30× (0.30–0.30, by round) | 0.30× (0.30–0.30, by round) |", text)


class ReferenceFileTests(unittest.TestCase):
    def test_writing_from_a_partial_run_keeps_the_other_ratios(self):
        ref = reference_of(REFERENCE_RUN)
        partial = result({"pk.rtt.pinned.p50": [40, 41, 42], "zmq.rtt.bytes.pinned.p50": [29, 30, 31]},
                         stamp="20261127T010000Z", commit="def5678")
        updated = reference.updated_reference(ref, partial)
        self.assertEqual(updated["ratios"]["pk.tput.100 / pyzmq"]["run"], "20261121T000000Z")
        self.assertEqual(updated["ratios"]["pk.rtt.pinned.p50 / pyzmq"]["run"], "20261127T010000Z")
        self.assertEqual(set(updated["runs"]), {"20261121T000000Z", "20261127T010000Z"})
        self.assertEqual(updated["runs"]["20261127T010000Z"]["commit"], "def5678")

    def test_a_quick_run_is_not_written_as_the_reference(self):
        with self.assertRaises(reference.ReferenceError):
            reference.updated_reference({}, result({"pk.tput.100": [1], "zmq.tput.100.bytes": [2]}, quick=True))

    def test_compare_on_stored_files_exits_1_with_strict_only_when_worse(self):
        with tempfile.TemporaryDirectory() as folder:
            ref_path, worse_path, same_path = (Path(folder) / name for name in ("ref.json", "worse.json", "same.json"))
            reference.write_reference(ref_path, reference_of(REFERENCE_RUN))
            worse_path.write_text(json.dumps(result({"pk.tput.100": [132_000, 135_000, 138_000],
                                                     "zmq.tput.100.bytes": [590_000, 600_000, 610_000]})))
            same_path.write_text(json.dumps(REFERENCE_RUN))
            with contextlib.redirect_stdout(io.StringIO()):
                self.assertEqual(reference.main(["compare", str(worse_path), "--reference", str(ref_path), "--strict"]), 1)
                self.assertEqual(reference.main(["compare", str(worse_path), "--reference", str(ref_path)]), 0)
                self.assertEqual(reference.main(["compare", str(same_path), "--reference", str(ref_path), "--strict"]), 0)

    def test_an_unreadable_results_file_is_reported_not_raised(self):
        with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(reference.main(["compare", str(Path(folder) / "missing.json")]), 2)
        self.assertIn("cannot be read", err.getvalue())


if __name__ == "__main__":
    unittest.main()
