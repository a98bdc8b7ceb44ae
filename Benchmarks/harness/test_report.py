"""Tests of the Markdown report (report.py), on made-up figures: no benchmark runs.

    scripts/bench --self-test
"""

import unittest

import report
from stats import summarize


def figure(title, unit, samples):
    return {"title": title, "unit": unit, "status": "ok", "lowerIsBetter": True, **summarize(samples)}


class MeshFloorTests(unittest.TestCase):
    # PeerKit's 64-node mesh at 65 µs per exchange; its floors at 26 µs (raw C) and 50 µs (bare NIO).
    FIGURES = {
        "pk.mesh.64.exchange": figure("64 nodes idle: CPU per heartbeat exchange (both ends)", "µs", [60, 65, 70, 65]),
        "raw.mesh.64.exchange": figure("raw C mesh, 64 nodes idle: CPU per heartbeat exchange (both ends)", "µs", [25, 26, 27, 26]),
        "nio.mesh.64.exchange": figure("bare SwiftNIO mesh, 64 nodes idle: CPU per heartbeat exchange (both ends)", "µs", [48, 50, 52, 50]),
    }

    def test_the_exchange_is_divided_by_each_floor(self):
        ratios = report.compute_ratios(self.FIGURES)["pk.mesh.64.exchange"]
        self.assertAlmostEqual(ratios["raw mesh"], 65 / 26)
        self.assertAlmostEqual(ratios["NIO mesh"], 65 / 50)

    def test_both_floors_are_listed_as_baselines_and_their_ratios_shown(self):
        text = report.markdown(self.FIGURES, report.compute_ratios(self.FIGURES),
                               {"cpu": "test", "cores": 2, "kernel": "test", "swift": "test"}, runs=1)
        baselines = text.split("| Baseline | median |", 1)[1].split("| Target", 1)[0]
        self.assertIn("raw C mesh, 64 nodes idle", baselines)
        self.assertIn("bare SwiftNIO mesh, 64 nodes idle", baselines)
        row = next(line for line in text.splitlines() if line.startswith("| 64 nodes idle: CPU per heartbeat exchange"))
        self.assertIn("2.50×", row)
        self.assertIn("1.30×", row)


class MachineTests(unittest.TestCase):
    CPUINFO = "processor\t: 0\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 1996.250\nflags\t\t: fpu pge pdpe1gb ssbd\n\nprocessor\t: 1\n"

    def test_the_details_name_clock_caches_and_pcid(self):
        self.assertEqual(report.cpu_details(self.CPUINFO, {2: "512K", 1: "32K", 3: "8192K"}),
                         "1996 MHz, L1 32K, L2 512K, L3 8192K, no pcid")
        self.assertEqual(report.cpu_details(self.CPUINFO.replace("pge", "pge pcid"), {}), "1996 MHz, pcid")
        self.assertEqual(report.cpu_details("model name\t: x\n", {}), "")

    def test_the_header_shows_them_and_does_without(self):
        figures = MeshFloorTests.FIGURES
        machine = {"cpu": "AMD EPYC", "cores": 2, "kernel": "Linux 6", "swift": "Swift 6.3"}
        plain = report.markdown(figures, report.compute_ratios(figures), machine, runs=1).splitlines()[0]
        self.assertTrue(plain.startswith("PeerKit benchmarks — AMD EPYC, 2 cores, Linux 6, Swift 6.3;"))
        detailed = report.markdown(figures, report.compute_ratios(figures), {**machine, "cpuDetails": "1996 MHz, no pcid"},
                                   runs=1).splitlines()[0]
        self.assertTrue(detailed.startswith("PeerKit benchmarks — AMD EPYC (1996 MHz, no pcid), 2 cores,"))


if __name__ == "__main__":
    unittest.main()
