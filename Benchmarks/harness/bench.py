#!/usr/bin/env python3
"""Runs PeerKit's benchmarks and their baselines in one invocation; prints a Markdown table with
ratios and writes the figures as JSON. `scripts/bench` builds everything and calls this.

Every measurement is a pair of processes over 127.0.0.1 (or one process for the JSON floor): the
serving process prints {"event":"ready","port":P}, the other is started against that port, and the
measuring one prints one JSON object with its result. Each measurement runs --runs times in fresh
processes; the table shows the median and the spread (min–max) of the runs. Every process is
bounded in time and ended by its PID.

After the tables it prints every ratio beside the same ratio of the committed reference run
(Benchmarks/reference.json) and flags the ones that got worse by more than the runs' own spread
(reference.py says the rule); --write-reference makes this run the reference.
"""

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

import processes
import reference
from report import compute_ratios, machine_description, markdown
from suite import Suite


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", required=True, help="where the release peerkit-bench is")
    parser.add_argument("--tools-dir", help="where the release listrd, listrctl and peerkit are, built as make install "
                                            "builds them (default: --bin-dir)")
    parser.add_argument("--raw", required=True, help="the compiled rawbench")
    parser.add_argument("--python", required=True, help="a Python with pyzmq")
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (fresh processes each)")
    parser.add_argument("--peerkit-messages", type=int, default=300_000, help="messages per PeerKit 100 B run")
    parser.add_argument("--quick", action="store_true", help="a tenth of the messages, to try the harness")
    parser.add_argument("--only", nargs="*", help="key prefixes to run, e.g. raw. pk.rtt")
    parser.add_argument("--out-dir", default="bench-results")
    parser.add_argument("--reference", default=str(reference.REFERENCE), help="the reference run to compare with")
    parser.add_argument("--write-reference", action="store_true",
                        help="after comparing, make this run's ratios the reference (the others are kept)")
    parser.add_argument("--strict", action="store_true", help="exit with status 1 when a ratio fell beyond its spread")
    args = parser.parse_args()

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    processes.failure_log_dir = Path(args.out_dir) / f"{stamp}-failures"
    machine = machine_description(args.python)
    suite = Suite(args)
    started = time.monotonic()
    suite.run()
    ratios = compute_ratios(suite.figures)
    print(markdown(suite.figures, ratios, machine, args.runs, suite.busy))
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{stamp}.json"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    # Uncommitted changes to what is measured make the commit a misleading label: say so.
    changed = subprocess.run(["git", "status", "--porcelain", "--", "Sources", "Benchmarks", "Package.swift"],
                             capture_output=True, text=True).stdout.strip()
    if commit and changed:
        commit += "-dirty"
    out.write_text(json.dumps({"timestamp": stamp, "commit": commit, "machine": machine, "runs": args.runs,
                               "quick": args.quick, "seconds": time.monotonic() - started, "busy": suite.busy,
                               "figures": suite.figures, "ratios": ratios}, indent=2, ensure_ascii=False) + "\n")
    print(f"\nWrote {out} ({time.monotonic() - started:.0f} s).", file=sys.stderr)
    print()
    status = reference.main(["compare", str(out), "--reference", args.reference] + (["--strict"] if args.strict else []))
    if args.write_reference:
        status = reference.main(["write", str(out), "--reference", args.reference]) or status
    sys.exit(status)


if __name__ == "__main__":
    main()
