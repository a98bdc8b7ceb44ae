#!/usr/bin/env python3
"""CPU per message of two or more peerkit-bench builds, interleaved: for bisecting a regression on
a shared machine, where rates and latencies follow the other tenants' load more than the code.

    Benchmarks/harness/cpu-cost.py [--rounds N] LABEL=PATH/peerkit-bench LABEL=PATH/peerkit-bench ...

Each round runs, for every build in turn, one 100 B `broadcast` (sink + source, 300,000 messages)
and one pinned request/reply (echo + ping, 20,000 round trips, both under `taskset -c 0`), and
counts the user + system CPU of both processes together (getrusage of the reaped children), divided
by the messages or round trips: start-up included, a percent or two. Alternating the builds spreads
the machine's moods over all of them. Prints one line per measurement and the median per build.
Uses only options every peerkit-bench since round 1 (08d979d) has, but for `--sessions`: both
sides of every pair then offer resumable sessions, the library's default since round 3 (a8ac075);
`--security MODE` (repeatable: each build is then measured in every mode, in turn, within each
round; a build from before round 2's option takes only `none`, its default); `--no-round-trips`.
"""

import argparse
import resource
import statistics
import sys

from processes import FAILURES, pair, pinned

MESSAGES, ROUND_TRIPS = 300_000, 20_000


def cpu_of(run):
    """(result, CPU seconds of the children reaped while `run` ran)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = run()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return result, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def throughput(binary, extra):
    return pair([binary, "sink", "--receivers", "1", "--ack-every", "10000", "--service-type", "bcpu", "--timeout", "120"] + extra,
                [binary, "source", "--connect", "{ports}", "--size", "100", "--count", str(MESSAGES), "--window", "20000",
                 "--api", "broadcast", "--service-type", "bcpu", "--timeout", "120"] + extra,
                result_from="server", timeout=120)


def round_trips(binary, extra):
    return pair(pinned([binary, "echo", "--service-type", "bcpu", "--timeout", "120"] + extra, True),
                pinned([binary, "ping", "--connect", "127.0.0.1:{port}", "--size", "100", "--count", str(ROUND_TRIPS),
                        "--service-type", "bcpu", "--timeout", "120"] + extra, True), timeout=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", action="store_true", help="both sides offer resumable sessions (the library's default)")
    parser.add_argument("--security", action="append", choices=["none", "psk", "cert"],
                        help="measure in this security mode (repeat for several; default none)")
    parser.add_argument("--no-round-trips", action="store_true", help="measure the 100 B throughput only")
    parser.add_argument("builds", nargs="+", help="LABEL=path to a release peerkit-bench")
    args = parser.parse_args()
    named = [build.split("=", 1) for build in args.builds]
    if any(len(build) != 2 for build in named):
        sys.exit("cpu-cost: name each build as LABEL=PATH, e.g. round1=/tmp/pkb-08d979d")
    modes = args.security or ["none"]
    # One measured build per build and mode: LABEL, or LABEL/MODE when several modes are measured.
    builds = [(label if len(modes) == 1 else f"{label}/{mode}", binary,
               (["--sessions"] if args.sessions else []) + ([] if mode == "none" else ["--security", mode]))
              for label, binary in named for mode in modes]
    samples = {label: {"tput": [], "tputCPU": [], "rtt": [], "rttCPU": []} for label, _, _ in builds}
    for round_number in range(args.rounds):
        for label, binary, extra in builds:
            s = samples[label]
            try:
                result, cpu = cpu_of(lambda: throughput(binary, extra))
                s["tput"].append(result["msgsPerSec"])
                s["tputCPU"].append(cpu / MESSAGES * 1e6)
                print(f"round {round_number + 1} {label}: 100 B {s['tput'][-1]:,.0f} msgs/s, "
                      f"{s['tputCPU'][-1]:.2f} µs CPU/msg (both sides)", flush=True)
            except FAILURES as error:
                print(f"round {round_number + 1} {label}: 100 B failed: {error}", flush=True)
            if args.no_round_trips:
                continue
            try:
                result, cpu = cpu_of(lambda: round_trips(binary, extra))
                s["rtt"].append(result["p50us"])
                s["rttCPU"].append(cpu / ROUND_TRIPS * 1e6)
                print(f"round {round_number + 1} {label}: request/reply pinned p50 {s['rtt'][-1]:.1f} µs, "
                      f"{s['rttCPU'][-1]:.1f} µs CPU/round trip (both sides)", flush=True)
            except FAILURES as error:
                print(f"round {round_number + 1} {label}: request/reply failed: {error}", flush=True)
    print()
    print("| build | 100 B msgs/s | CPU per message, both sides | request/reply p50, pinned | CPU per round trip, both sides |")
    print("|---|---:|---:|---:|---:|")
    for label, _, _ in builds:
        s = samples[label]
        cell = lambda values, fmt: (f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–"
                                    f"{fmt.format(max(values))})" if values else "failed")
        trips = ("– | –" if args.no_round_trips else
                 f"{cell(s['rtt'], '{:.1f}')} µs | {cell(s['rttCPU'], '{:.1f}')} µs")
        print(f"| {label} | {cell(s['tput'], '{:,.0f}')} | {cell(s['tputCPU'], '{:.2f}')} µs | {trips} |")


if __name__ == "__main__":
    main()
