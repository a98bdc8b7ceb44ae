#!/usr/bin/env python3
"""No silent regressions: each ratio of a `make bench` run beside the same ratio of a committed
reference run (Benchmarks/reference.json), flagging every ratio that got worse by more than the
runs' own spread.

    Benchmarks/harness/reference.py compare RESULT.json [--reference FILE] [--strict]
    Benchmarks/harness/reference.py write RESULT.json [--reference FILE] [--force]

`scripts/bench` calls this after every run (and `scripts/bench --compare RESULT.json`,
`scripts/bench --write-reference [RESULT.json]` call it without running anything).

The rule. A ratio is PeerKit's figure ÷ a baseline's of the same run (report.RATIOS). Each figure
was measured in several fresh runs, so each ratio has a range (report.ratio_range). A figure
measured in rounds with its baseline (Suite.measure_rounds: each round runs both, one after the
other) is divided round by round: the ratio is the median of the rounds' ratios, its range their
lowest to highest. Otherwise the ratio is median ÷ median, its range from PeerKit's worst run
against the baseline's best run to PeerKit's best run against the baseline's worst (min ÷ max to
max ÷ min). Its spread is the width of that range relative to the ratio. A ratio is flagged
*worse* when it moved the wrong way (down for rates, up for times) by more than the larger of its
two spreads, the reference's and this run's; *better* likewise the other way; within that, it is
noise and not flagged. A figure measured once has no spread of its own, so with `--runs 1` every
move of its ratios beyond the baseline's spread is flagged.

Ratios between two baselines (bare SwiftNIO against raw C or pyzmq: no PeerKit code in either
figure) are compared the same way but are not regressions: when they move beyond their spread,
the machine is not the reference's in what the figures feel (its CPU, its caches, what a context
switch costs), and PeerKit's ratios move with it. The report says so under HOST, naming them, so
that a flagged ratio of PeerKit's is read against the machine before the code.

The reference keeps, for each ratio, its value and range and the run it came from. Writing a
reference from a run replaces the ratios that run measured and keeps the others (a run with
`--only` updates only its own ratios); each ratio is still a quotient of two figures of one run.
"""

import argparse
import datetime
import json
import sys
from pathlib import Path

from report import RATIOS, busy_note, ratio_range

REFERENCE = Path(__file__).resolve().parent.parent / "reference.json"
FORMAT = 1
# Figures of the baselines alone (bare SwiftNIO, raw C, pyzmq, Foundation's JSON): a ratio between
# two of them holds no PeerKit code.
BASELINE_FIGURES = ("nio.", "raw.", "zmq.", "json.floor")


class ReferenceError(Exception):
    """A results or reference file that cannot be used; the message says which and why."""


def load_json(path, what):
    try:
        return json.loads(Path(path).read_text())
    except OSError as error:
        raise ReferenceError(f"The {what} {path} cannot be read ({error.strerror}); "
                             f"pass a file that `scripts/bench` wrote into bench-results/.") from error
    except json.JSONDecodeError as error:
        raise ReferenceError(f"The {what} {path} is not JSON ({error}); pass a file that `scripts/bench` "
                             f"wrote into bench-results/.") from error


def ratio_entries(result):
    """Every ratio a run measured, keyed 'figure / column', with its value, range and direction."""
    figures = result.get("figures", {})
    run = result.get("timestamp", "?")
    entries = {}
    for key, columns in RATIOS:
        for column, baseline in columns:
            ratio = ratio_range(figures, key, baseline)
            if ratio is None:
                continue
            entries[f"{key} / {column}"] = {
                "figure": key, "column": column, "baseline": baseline.removesuffix("×2"),
                "title": f"{figures[key]['title']} / {column}", **ratio,
                "lowerIsBetter": bool(figures[key].get("lowerIsBetter")), "run": run,
            }
    return entries


def spread(entry):
    """The width of a ratio's range relative to the ratio (0.1 is ±5 % around it, roughly)."""
    return (entry["high"] - entry["low"]) / entry["value"] if entry["value"] else 0.0


def verdict(reference, current):
    """('worse' | 'better' | '', relative change, the spread allowed) of one ratio."""
    change = current["value"] / reference["value"] - 1 if reference["value"] else 0.0
    allowed = max(spread(reference), spread(current))
    if abs(change) <= allowed:
        return "", change, allowed
    improved = change < 0 if current["lowerIsBetter"] else change > 0
    return ("better" if improved else "worse"), change, allowed


def compare(reference, result):
    """Rows (key, reference entry, current entry, verdict, change, allowed) for the ratios in both, and
    the keys of the reference that this run did not measure."""
    current = ratio_entries(result)
    known = reference.get("ratios", {})
    rows = []
    for key, entry in current.items():
        before = known.get(key)
        if before is None:
            rows.append((key, None, entry, "", None, None))
            continue
        rows.append((key, before, entry, *verdict(before, entry)))
    missing = [key for key in known if key not in current]
    return rows, missing


def host_moved(rows):
    """The titles of the ratios between two baselines that moved, either way, by more than their
    spread: the machine's doing, since no PeerKit code is in them."""
    return [now["title"] for _, before, now, mark, *_ in rows
            if before is not None and mark and now["figure"].startswith(BASELINE_FIGURES)]


def format_ratio(entry):
    by_round = ", by round" if entry.get("paired") else ""
    return f"{entry['value']:.2f}× ({entry['low']:.2f}–{entry['high']:.2f}{by_round})"


def markdown(reference, result, reference_path):
    rows, missing = compare(reference, result)
    runs = reference.get("runs", {})
    sources = sorted({f"{runs.get(e['run'], {}).get('commit', '?')} ({e['run']})"
                      for _, e, *_ in rows if e is not None})
    lines = [f"Against the reference ({reference_path}: {', '.join(sources) or 'no ratio in common'}). "
             "Ranges are min÷max to max÷min of the runs, or the lowest to highest of the rounds' ratios "
             "(\"by round\": a figure and its baseline measured in the same rounds); a ratio is flagged "
             "when it moved the wrong way by more than the larger of its two spreads.", "",
             "| Ratio | reference | this run | change | allowed | |", "|---|---:|---:|---:|---:|---|"]
    for key, before, now, mark, change, allowed in rows:
        if before is None:
            lines.append(f"| {now['title']} | – | {format_ratio(now)} | | | new |")
            continue
        cell = {"worse": "**worse**", "better": "better", "": ""}[mark]
        lines.append(f"| {now['title']} | {format_ratio(before)} | {format_ratio(now)} | "
                     f"{change * 100:+.0f} % | ±{allowed * 100:.0f} % | {cell} |")
    worse = [now["title"] for _, _, now, mark, *_ in rows
             if mark == "worse" and not now["figure"].startswith(BASELINE_FIGURES)]
    lines.append("")
    if worse:
        lines.append(f"REGRESSION: {len(worse)} ratio{'s' if len(worse) != 1 else ''} fell by more than the runs' "
                     f"own spread: {'; '.join(worse)}.")
    else:
        compared = sum(1 for row in rows if row[1] is not None)
        lines.append(f"No ratio fell by more than the runs' own spread ({compared} compared).")
    moved = host_moved(rows)
    if moved:
        lines.append(f"HOST: {len(moved)} ratio{'s' if len(moved) != 1 else ''} between two baselines, with no "
                     f"PeerKit code in either figure, moved by more than the runs' own spread as well: "
                     f"{'; '.join(moved)}. This machine is not the reference's in what these figures feel (its "
                     f"CPU, its caches, what a context switch costs), and PeerKit's ratios move with it: before "
                     f"reading a flag above as a regression of the code, measure the two commits alternately on "
                     f"this machine (Benchmarks/harness/cpu-cost.py).")
    if missing:
        lines.append(f"{len(missing)} ratio{'s' if len(missing) != 1 else ''} of the reference "
                     f"{'were' if len(missing) != 1 else 'was'} not measured in this run.")
    note = busy_note(result.get("busy"))
    if note:
        lines.append(note)
    if result.get("quick"):
        lines.append("This run was --quick (a tenth of the messages): its ratios are not comparable to a full run's.")
    return "\n".join(lines), worse


def updated_reference(reference, result, force=False):
    """The reference with this run's ratios in place of the same ratios before; the others kept."""
    if result.get("quick") and not force:
        raise ReferenceError("This run was made with --quick (a tenth of the messages); its ratios are not what a "
                             "full `make bench` measures. Write the reference from a full run (or pass --force).")
    entries = ratio_entries(result)
    if not entries:
        raise ReferenceError("This run measured no ratio (no PeerKit figure together with its baseline); "
                             "run the figures and their baselines, e.g. scripts/bench --only pk.rtt zmq.rtt raw.rtt.")
    ratios = dict(reference.get("ratios", {}))
    ratios.update(entries)
    runs = dict(reference.get("runs", {}))
    runs[result.get("timestamp", "?")] = {key: result.get(key) for key in ("commit", "machine", "runs", "quick")}
    used = {entry["run"] for entry in ratios.values()}
    return {"format": FORMAT,
            "about": "The reference ratios `make bench` compares each run with. Update it on purpose, in the "
                     "commit that earns it: scripts/bench --write-reference [bench-results/RUN.json]. "
                     "See Documentation/Performance.md, \"The reference run\".",
            "written": datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ"),
            "runs": {stamp: run for stamp, run in runs.items() if stamp in used},
            "ratios": dict(sorted(ratios.items()))}


def load_reference(path):
    if not Path(path).exists():
        return {"format": FORMAT, "runs": {}, "ratios": {}}
    reference = load_json(path, "reference")
    if reference.get("format") != FORMAT:
        raise ReferenceError(f"The reference {path} has format {reference.get('format')!r}, not {FORMAT}; "
                             f"write it again with scripts/bench --write-reference.")
    return reference


def write_reference(path, reference):
    Path(path).write_text(json.dumps(reference, indent=2, ensure_ascii=False) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["compare", "write"])
    parser.add_argument("result", help="a results file of scripts/bench (bench-results/<time>.json)")
    parser.add_argument("--reference", default=str(REFERENCE))
    parser.add_argument("--strict", action="store_true", help="compare: exit with status 1 when a ratio is worse")
    parser.add_argument("--force", action="store_true", help="write: accept a --quick run")
    args = parser.parse_args(argv)
    try:
        result = load_json(args.result, "results file")
        reference = load_reference(args.reference)
        if args.action == "compare":
            if not reference.get("ratios"):
                print(f"There is no reference at {args.reference} yet; write one with scripts/bench --write-reference.")
                return 0
            text, worse = markdown(reference, result, args.reference)
            print(text)
            return 1 if worse and args.strict else 0
        updated = updated_reference(reference, result, force=args.force)
        write_reference(args.reference, updated)
        count = len(ratio_entries(result))
        print(f"Wrote {args.reference}: {count} ratios from {args.result} (commit {result.get('commit', '?')}), "
              f"{len(updated['ratios'])} in all.", file=sys.stderr)
        return 0
    except ReferenceError as error:
        print(f"reference: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
