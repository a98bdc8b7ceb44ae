#!/usr/bin/env python3
"""Compares two runs of `make bench`: prints a Markdown table of every figure's median in both,
the change, and whether it is better or worse (rates up and times down are better).

    Benchmarks/harness/compare.py bench-results/OLD.json bench-results/NEW.json

Figures move 10–30 % between runs on a busy machine; a change is only flagged when it is larger
than both runs' own spread (min–max). Ratios to the baselines of the same run are steadier than
raw figures: they are compared too.
"""

import json
import sys
from pathlib import Path

from stats import format_value


def load(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        sys.exit(f"compare: {path} is not a bench result ({error}); pass two files from bench-results/.")


def verdict(old, new):
    """'better', 'worse' or '' (within the runs' own spread)."""
    spread = max(old["max"] - old["min"], new["max"] - new["min"])
    change = new["median"] - old["median"]
    if abs(change) <= spread:
        return ""
    improved = change < 0 if old.get("lowerIsBetter") else change > 0
    return "better" if improved else "worse"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    old, new = load(sys.argv[1]), load(sys.argv[2])
    print(f"Comparing {old.get('commit', '?')} ({old['timestamp']}) with {new.get('commit', '?')} ({new['timestamp']}).\n")
    print("| Figure | before | after | change | |")
    print("|---|---:|---:|---:|---|")
    for key, after in new["figures"].items():
        before = old["figures"].get(key)
        if not before or before.get("status") != "ok" or after.get("status") != "ok":
            continue
        unit = after["unit"]
        change = (after["median"] / before["median"] - 1) * 100 if before["median"] else 0
        print(f"| {after['title']} | {format_value(before['median'], unit)} {unit} | "
              f"{format_value(after['median'], unit)} {unit} | {change:+.0f} % | {verdict(before, after)} |")
    print("\n| Ratio | before | after |")
    print("|---|---:|---:|")
    for key, columns in new.get("ratios", {}).items():
        for column, value in columns.items():
            previous = old.get("ratios", {}).get(key, {}).get(column)
            if previous is not None:
                title = new["figures"][key]["title"]
                print(f"| {title} / {column} | {previous:.2f}× | {value:.2f}× |")


if __name__ == "__main__":
    main()
