"""Ratios to the baselines, issue 6's targets, the Markdown report and the machine it ran on."""

import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

from stats import format_figure, format_value


RATIOS = [
    ("pk.tput.100", [("raw", "raw.tput.100.single"), ("raw batched", "raw.tput.100.batched"),
                     ("pyzmq", "zmq.tput.100.bytes"), ("pyzmq JSON", "zmq.tput.100.json"),
                     ("JSON floor", "json.floor.100")]),
    ("pk.tput.100.send", [("raw", "raw.tput.100.single"), ("raw batched", "raw.tput.100.batched"),
                          ("pyzmq", "zmq.tput.100.bytes"), ("pyzmq JSON", "zmq.tput.100.json"),
                          ("JSON floor", "json.floor.100")]),
    # With a payload type that writes and reads its own JSON (PeerPayloadCodable), against the same
    # figure through Codable in the same rounds (issue 34, goal 2).
    ("pk.tput.100.own", [("raw", "raw.tput.100.single"), ("raw batched", "raw.tput.100.batched"),
                         ("pyzmq", "zmq.tput.100.bytes"), ("pyzmq JSON", "zmq.tput.100.json"),
                         ("Codable", "pk.tput.100")]),
    ("pk.tput.100.send.own", [("raw", "raw.tput.100.single"), ("raw batched", "raw.tput.100.batched"),
                              ("pyzmq", "zmq.tput.100.bytes"), ("pyzmq JSON", "zmq.tput.100.json"),
                              ("Codable", "pk.tput.100.send")]),
    ("pk.tput.64k", [("raw", "raw.tput.64k"), ("pyzmq", "zmq.tput.64k"), ("JSON floor", "json.floor.64k")]),
    ("pk.tput.4m", [("raw", "raw.tput.4m"), ("pyzmq", "zmq.tput.4m"), ("JSON floor", "json.floor.4m")]),
    ("pk.rtt.pinned.p50", [("raw", "raw.rtt.pinned.p50"), ("pyzmq", "zmq.rtt.bytes.pinned.p50"),
                           ("pyzmq JSON", "zmq.rtt.json.pinned.p50"), ("JSON floor", "json.floor.100.us×2"),
                           ("NIO + tasks", "nio.rtt.tasks.pinned.p50")]),
    ("pk.rtt.pinned.p99", [("raw", "raw.rtt.pinned.p99"), ("pyzmq", "zmq.rtt.bytes.pinned.p99"),
                           ("pyzmq JSON", "zmq.rtt.json.pinned.p99")]),
    ("pk.rtt.unpinned.p50", [("raw", "raw.rtt.unpinned.p50"), ("pyzmq", "zmq.rtt.bytes.unpinned.p50"),
                             ("pyzmq JSON", "zmq.rtt.json.unpinned.p50"), ("JSON floor", "json.floor.100.us×2"),
                             ("NIO + tasks", "nio.rtt.tasks.unpinned.p50")]),
    ("pk.rtt.unpinned.p99", [("raw", "raw.rtt.unpinned.p99"), ("pyzmq", "zmq.rtt.bytes.unpinned.p99"),
                             ("pyzmq JSON", "zmq.rtt.json.unpinned.p99")]),
    ("pk.rtt.own.pinned.p50", [("raw", "raw.rtt.pinned.p50"), ("pyzmq", "zmq.rtt.bytes.pinned.p50"),
                               ("pyzmq JSON", "zmq.rtt.json.pinned.p50"), ("Codable", "pk.rtt.pinned.p50")]),
    ("pk.rtt.own.unpinned.p50", [("raw", "raw.rtt.unpinned.p50"), ("pyzmq", "zmq.rtt.bytes.unpinned.p50"),
                                 ("pyzmq JSON", "zmq.rtt.json.unpinned.p50"), ("Codable", "pk.rtt.unpinned.p50")]),
    ("pk.rtt.loop.pinned.p50", [("raw", "raw.rtt.pinned.p50"), ("pyzmq", "zmq.rtt.bytes.pinned.p50"),
                                ("pyzmq JSON", "zmq.rtt.json.pinned.p50"), ("bare NIO", "nio.rtt.loop.pinned.p50"),
                                ("NIO + loop tasks", "nio.rtt.looptask.pinned.p50")]),
    ("pk.rtt.loop.unpinned.p50", [("raw", "raw.rtt.unpinned.p50"), ("pyzmq", "zmq.rtt.bytes.unpinned.p50"),
                                  ("pyzmq JSON", "zmq.rtt.json.unpinned.p50"), ("bare NIO", "nio.rtt.loop.unpinned.p50"),
                                  ("NIO + loop tasks", "nio.rtt.looptask.unpinned.p50")]),
    ("pk.resource.1g", [("raw", "raw.tput.1g")]),
    # The echo with an immediate responder (respondImmediately), against the same baselines and
    # against the echo's usual handler task in the same rounds ("respond").
    *[(f"pk.rtt.immediate.{label}.p50", [("raw", f"raw.rtt.{label}.p50"), ("pyzmq", f"zmq.rtt.bytes.{label}.p50"),
                                         ("pyzmq JSON", f"zmq.rtt.json.{label}.p50"), ("respond", f"pk.rtt.{label}.p50")])
      for label in ("pinned", "unpinned")],
    *[(f"pk.rtt.loop.immediate.{label}.p50", [("raw", f"raw.rtt.{label}.p50"), ("pyzmq", f"zmq.rtt.bytes.{label}.p50"),
                                              ("pyzmq JSON", f"zmq.rtt.json.{label}.p50"), ("bare NIO", f"nio.rtt.loop.{label}.p50"),
                                              ("respond", f"pk.rtt.loop.{label}.p50")])
      for label in ("pinned", "unpinned")],
    *[(f"pk.rtt.loop.immediate.own.{label}.p50", [("raw", f"raw.rtt.{label}.p50"), ("pyzmq", f"zmq.rtt.bytes.{label}.p50"),
                                                  ("bare NIO", f"nio.rtt.loop.{label}.p50"),
                                                  ("Codable", f"pk.rtt.loop.immediate.{label}.p50")])
      for label in ("pinned", "unpinned")],
    ("pk.fanout.1", [("raw", "raw.tput.100.single"), ("pyzmq", "zmq.tput.100.bytes"), ("pyzmq PUB/SUB", "zmq.fanout.1"),
                      ("JSON floor", "json.floor.100")]),
    ("pk.fanout.4", [("raw", "raw.tput.100.single"), ("pyzmq", "zmq.tput.100.bytes"), ("pyzmq PUB/SUB", "zmq.fanout.4"),
                      ("JSON floor", "json.floor.100")]),
    ("pk.fanout.16", [("raw", "raw.tput.100.single"), ("pyzmq", "zmq.tput.100.bytes"), ("pyzmq PUB/SUB", "zmq.fanout.16"),
                      ("JSON floor", "json.floor.100")]),
]
# PeerKit's JSON codec against Foundation's (the JSON floor) on the same envelope, in the same run;
# at 100 B also against the same envelope written and read by hand without Codable: what Codable's
# generic containers cost it (issue 34, goal 2).
RATIOS += [(f"pk.json.{what}", [("JSON floor", f"json.floor.{what}")]
            + ([("no Codable", f"direct.json.{what}")] if what.startswith("100") else []))
           for what in ("100", "100.us", "64k", "4m")]
# Issue 34's goal 1: request/reply's floors in bare SwiftNIO against pyzmq, in the same rounds: on
# one event loop alone, with a Swift task on that loop on each side (as `pk.rtt.loop`), and with each
# request and reply handed to a Swift task off the loop (the hand-offs of PeerKit's default). What
# these cannot reach, PeerKit cannot either.
RATIOS += [(f"nio.rtt.{kind}.{label}.p50", [("raw", f"raw.rtt.{label}.p50"), ("pyzmq", f"zmq.rtt.bytes.{label}.p50")])
           for kind in ("loop", "looptask", "tasks") for label in ("pinned", "unpinned")]
# Issue 34's goal 4: an idle link's heartbeat exchange against a raw C ping-pong (one core) of the same
# run, and against its floors: the same mesh in raw C and in bare SwiftNIO (the same connections,
# beats and frame sizes, and nothing else).
RATIOS += [(f"pk.mesh.{count}.exchange", [("raw", "raw.rtt.pinned.p50"), ("raw mesh", f"raw.mesh.{count}.exchange"),
                                          ("NIO mesh", f"nio.mesh.{count}.exchange")])
           for count in (8, 16, 32, 64)]
# What security costs: each TLS figure against the same measurement in plaintext, in the same run.
RATIOS += [(f"pk.sec.{mode}.{what}", [("plaintext", f"pk.sec.none.{what}")])
           for mode in ("psk", "cert")
           for what in ("tput.100", "tput.64k", "tput.4m", "rtt.p50", "rtt.p99", "connect")]
# What resumable sessions cost (issue 34's goal 5): on against off, in the same run.
RATIOS += [(f"pk.sess.on.{what}", [("sessions off", f"pk.sess.off.{what}")]) for what in ("tput.100", "rtt.p50", "rtt.p99")]
RATIO_COLUMNS = ["raw", "raw batched", "raw mesh", "NIO mesh", "bare NIO", "NIO + loop tasks", "NIO + tasks", "pyzmq",
                 "pyzmq PUB/SUB", "pyzmq JSON", "JSON floor", "no Codable", "Codable", "plaintext", "sessions off"]

# The issues' targets: (key, description, check on the figures → (met, where it stands)).
TARGETS = [
    ("pk.tput.100", "≥ 0.5× pyzmq PUSH/PULL bytes",
     lambda f: ratio_target(f, "pk.tput.100", "zmq.tput.100.bytes", lambda r: r >= 0.5)),
    ("pk.rtt.pinned.p50", "≤ 2× raw ping-pong (one core)",
     lambda f: ratio_target(f, "pk.rtt.pinned.p50", "raw.rtt.pinned.p50", lambda r: r <= 2)),
    ("listr.cli", "≤ 30 ms", lambda f: absolute_target(f, "listr.cli", lambda v: v <= 30)),
    ("pk.discovery.pair", "≤ 1.2 s", lambda f: absolute_target(f, "pk.discovery.pair", lambda v: v <= 1200)),
    ("pk.discovery.join", "≤ 50 ms", lambda f: absolute_target(f, "pk.discovery.join", lambda v: v <= 50)),
    ("listr.dump", "≥ 300 MB/s", lambda f: absolute_target(f, "listr.dump", lambda v: v >= 300)),
    # Issue 13: the store on SQLite, and watch.
    ("listr.store.add.200k", "p50 ≤ empty store's + 10 ms",
     lambda f: difference_target(f, "listr.store.add.200k", "listr.store.add.empty", lambda d: d <= 10)),
    ("listr.store.replace.200k", "< 2 s", lambda f: absolute_target(f, "listr.store.replace.200k", lambda v: v < 2000)),
    ("listr.store.dump.200k", "< 2 s", lambda f: absolute_target(f, "listr.store.dump.200k", lambda v: v < 2000)),
    ("listr.watch", "≤ 50 ms", lambda f: absolute_target(f, "listr.watch", lambda v: v <= 50)),
    # Issue 14: messages against ZeroMQ in the same run, and the command-line tool.
    ("pk.tput.100.send", "≥ 0.5× pyzmq PUSH/PULL bytes",
     lambda f: ratio_target(f, "pk.tput.100.send", "zmq.tput.100.bytes", lambda r: r >= 0.5)),
    ("pk.tput.64k", "≥ 0.6× pyzmq PUSH/PULL",
     lambda f: ratio_target(f, "pk.tput.64k", "zmq.tput.64k", lambda r: r >= 0.6)),
    ("pk.tput.4m", "≥ 0.6× pyzmq PUSH/PULL",
     lambda f: ratio_target(f, "pk.tput.4m", "zmq.tput.4m", lambda r: r >= 0.6)),
    # Issue 14: idle meshes.
    ("pk.mesh.64.cpu", "≤ 5 % of one core", lambda f: absolute_target(f, "pk.mesh.64.cpu", lambda v: v <= 5)),
    ("pk.mesh.64.segments", "≤ 1 segment/s per connection", lambda f: absolute_target(f, "pk.mesh.64.segments", lambda v: v <= 1)),
    ("pk.mesh.64.loss", "≤ 3 s", lambda f: absolute_target(f, "pk.mesh.64.loss", lambda v: v <= 3)),
    # Issue 34: round 3.
    ("pk.rtt.pinned.p50", "≤ 1.0× pyzmq REQ/REP (one core; issue 34)",
     lambda f: ratio_target(f, "pk.rtt.pinned.p50", "zmq.rtt.bytes.pinned.p50", lambda r: r <= 1.0)),
    ("pk.rtt.unpinned.p50", "≤ 1.0× pyzmq REQ/REP (issue 34)",
     lambda f: ratio_target(f, "pk.rtt.unpinned.p50", "zmq.rtt.bytes.unpinned.p50", lambda r: r <= 1.0)),
    ("pk.rtt.loop.pinned.p50", "≤ 1.0× pyzmq REQ/REP, one event loop (one core; issue 34)",
     lambda f: ratio_target(f, "pk.rtt.loop.pinned.p50", "zmq.rtt.bytes.pinned.p50", lambda r: r <= 1.0)),
    ("pk.rtt.loop.unpinned.p50", "≤ 1.0× pyzmq REQ/REP, one event loop (issue 34)",
     lambda f: ratio_target(f, "pk.rtt.loop.unpinned.p50", "zmq.rtt.bytes.unpinned.p50", lambda r: r <= 1.0)),
    ("pk.tput.100", "≥ 0.35× pyzmq PUSH/PULL bytes (issue 34)",
     lambda f: ratio_target(f, "pk.tput.100", "zmq.tput.100.bytes", lambda r: r >= 0.35)),
    ("pk.tput.100", "≥ 2× pyzmq PUSH/PULL send_json (issue 34)",
     lambda f: ratio_target(f, "pk.tput.100", "zmq.tput.100.json", lambda r: r >= 2)),
    ("pk.tput.100.send", "≥ 0.35× pyzmq PUSH/PULL bytes (issue 34)",
     lambda f: ratio_target(f, "pk.tput.100.send", "zmq.tput.100.bytes", lambda r: r >= 0.35)),
    ("pk.tput.100.send", "≥ 2× pyzmq PUSH/PULL send_json (issue 34)",
     lambda f: ratio_target(f, "pk.tput.100.send", "zmq.tput.100.json", lambda r: r >= 2)),
    ("pk.tput.100.own", "≥ 0.35× pyzmq PUSH/PULL bytes, own payload coding (issue 34)",
     lambda f: ratio_target(f, "pk.tput.100.own", "zmq.tput.100.bytes", lambda r: r >= 0.35)),
    ("pk.tput.100.send.own", "≥ 0.35× pyzmq PUSH/PULL bytes, own payload coding (issue 34)",
     lambda f: ratio_target(f, "pk.tput.100.send.own", "zmq.tput.100.bytes", lambda r: r >= 0.35)),
    ("pk.rtt.own.pinned.p50", "≤ 1.0× pyzmq REQ/REP, own payload coding (one core; issue 34)",
     lambda f: ratio_target(f, "pk.rtt.own.pinned.p50", "zmq.rtt.bytes.pinned.p50", lambda r: r <= 1.0)),
    *[(f"pk.rtt.{kind}.{label}.p50", f"≤ 1.0× pyzmq REQ/REP, {what} (issue 34)",
       lambda f, kind=kind, label=label: ratio_target(f, f"pk.rtt.{kind}.{label}.p50", f"zmq.rtt.bytes.{label}.p50", lambda r: r <= 1.0))
      for kind, what in (("immediate", "immediate responder"), ("loop.immediate", "immediate responder, one event loop"))
      for label in ("pinned", "unpinned")],
    ("pk.mesh.64.exchange", "≤ 50 µs of CPU, both ends (issue 34)",
     lambda f: absolute_target(f, "pk.mesh.64.exchange", lambda v: v <= 50)),
    ("pk.sess.on.tput.100", "≥ 0.95× sessions off (issue 32)",
     lambda f: ratio_target(f, "pk.sess.on.tput.100", "pk.sess.off.tput.100", lambda r: r >= 0.95)),
    ("pk.sess.on.rtt.p50", "≤ 1.03× sessions off (issue 32)",
     lambda f: ratio_target(f, "pk.sess.on.rtt.p50", "pk.sess.off.rtt.p50", lambda r: r <= 1.03)),
    # Issue 15: resources.
    ("pk.resource.1g", "≥ 0.5× raw C copy of the same bytes",
     lambda f: ratio_target(f, "pk.resource.1g", "raw.tput.1g", lambda r: r >= 0.5)),
    ("pk.resource.1g.rss.sender", "< 64 MiB", lambda f: absolute_target(f, "pk.resource.1g.rss.sender", lambda v: v < 64)),
    ("pk.resource.1g.rss.receiver", "< 64 MiB", lambda f: absolute_target(f, "pk.resource.1g.rss.receiver", lambda v: v < 64)),
]


TARGET_TITLES = {
    "pk.tput.100": "PeerKit 100 B one-way, broadcast", "pk.rtt.pinned.p50": "PeerKit request/reply p50, pinned",
    "pk.tput.100.send": "PeerKit 100 B one-way, send(_:to:)", "pk.tput.64k": "PeerKit 64 KiB one-way",
    "pk.tput.4m": "PeerKit 4 MiB one-way", "pk.rtt.unpinned.p50": "PeerKit request/reply p50, unpinned",
    "pk.rtt.loop.pinned.p50": "PeerKit request/reply p50, one event loop, pinned",
    "pk.rtt.loop.unpinned.p50": "PeerKit request/reply p50, one event loop, unpinned",
    "pk.rtt.immediate.pinned.p50": "PeerKit request/reply p50, immediate responder, pinned",
    "pk.rtt.immediate.unpinned.p50": "PeerKit request/reply p50, immediate responder, unpinned",
    "pk.rtt.loop.immediate.pinned.p50": "PeerKit request/reply p50, immediate responder, one event loop, pinned",
    "pk.rtt.loop.immediate.unpinned.p50": "PeerKit request/reply p50, immediate responder, one event loop, unpinned",
    "pk.mesh.64.exchange": "64 nodes idle: CPU per heartbeat exchange (both ends)",
    "listr.cli": "listrctl item list", "pk.discovery.pair": "fresh pair, resume() → connected",
    "pk.discovery.join": "new transceiver joins an advertised peer", "listr.dump": "store dump, 64 MiB",
    "listr.store.add.200k": "item add, 200,000-item store", "listr.store.replace.200k": "store replace, 200,000 items",
    "listr.store.dump.200k": "store dump, 200,000 items", "listr.watch": "watchers see a change",
    "pk.resource.1g": "resource, 1 GiB, vs raw C", "pk.resource.1g.rss.sender": "resource, 1 GiB: sender's RSS growth",
    "pk.resource.1g.rss.receiver": "resource, 1 GiB: receiver's RSS growth",
}


def baseline_value(figures, key):
    if key.endswith("×2"):
        figure = figures.get(key[:-2])
        return figure["median"] * 2 if figure and figure.get("status") == "ok" else None
    figure = figures.get(key)
    return figure["median"] if figure and figure.get("status") == "ok" else None


def ratio_target(figures, key, baseline, check):
    """A target on a ratio, read as the ratio tables read it (``ratio_range``: round by round when
    the two figures were measured in the same rounds)."""
    ratio = ratio_range(figures, key, baseline)
    if ratio is None:
        return None, "not measured"
    return check(ratio["value"]), f"{ratio['value']:.2f}×"


def difference_target(figures, key, baseline, check):
    mine, theirs = baseline_value(figures, key), baseline_value(figures, baseline)
    if mine is None or theirs is None:
        return None, "not measured"
    difference = mine - theirs
    return check(difference), f"{difference:+.1f} ms"


def absolute_target(figures, key, check):
    value = baseline_value(figures, key)
    if value is None:
        return None, "not measured"
    return check(value), format_value(value, figures[key]["unit"]) + " " + figures[key]["unit"]


def ratio_range(figures, key, baseline):
    """PeerKit's figure `key` ÷ the figure `baseline` (a key ending in ×2 doubles it) of one run, as
    {"value", "low", "high", "paired"}, or None when either was not measured.

    Two figures measured in the same rounds (the same `pairedIn`, Suite.measure_rounds) are divided
    round by round: the value is the median of those ratios, the range their lowest to highest.
    What the machine's other tenants did during a round falls on both figures of it, so this range
    is much narrower than that of figures measured minutes apart. Otherwise the value is median ÷
    median and the range PeerKit's worst run against the baseline's best to its best against the
    baseline's worst (min ÷ max to max ÷ min)."""
    factor = 1
    if baseline.endswith("×2"):
        baseline, factor = baseline[:-2], 2
    mine, theirs = figures.get(key), figures.get(baseline)
    if not all(figure and figure.get("status") == "ok" for figure in (mine, theirs)):
        return None
    if not mine.get("median") or not theirs.get("median") or min(theirs["samples"]) <= 0:
        return None
    group = mine.get("pairedIn")
    if group is not None and group == theirs.get("pairedIn") and len(mine["samples"]) == len(theirs["samples"]):
        by_round = [a / (b * factor) for a, b in zip(mine["samples"], theirs["samples"])]
        return {"value": statistics.median(by_round), "low": min(by_round), "high": max(by_round), "paired": True}
    return {"value": mine["median"] / (theirs["median"] * factor), "low": mine["min"] / (theirs["max"] * factor),
            "high": mine["max"] / (theirs["min"] * factor), "paired": False}


def compute_ratios(figures):
    ratios = {}
    for key, columns in RATIOS:
        for column, baseline in columns:
            ratio = ratio_range(figures, key, baseline)
            if ratio is not None:
                ratios.setdefault(key, {})[column] = ratio["value"]
    return ratios


def markdown(figures, ratios, machine, runs, busy=None):
    details = f" ({machine['cpuDetails']})" if machine.get("cpuDetails") else ""
    lines = [f"PeerKit benchmarks — {machine['cpu']}{details}, {machine['cores']} cores, {machine['kernel']}, "
             f"{machine['swift']}; median of {runs} run{'s' if runs != 1 else ''} in fresh processes (min–max of the runs in brackets).", ""]
    lines += ["| PeerKit | median | " + " | ".join(f"/ {c}" for c in RATIO_COLUMNS) + " |",
              "|---|---:|" + "---:|" * len(RATIO_COLUMNS)]
    for key, figure in figures.items():
        if not key.startswith(("pk.", "listr.")):
            continue
        cells = [figure["title"], format_figure(figure)]
        for column in RATIO_COLUMNS:
            value = ratios.get(key, {}).get(column)
            cells.append(f"{value:.2f}×" if value is not None else "")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Ratios are PeerKit ÷ baseline: above 1 is faster for rates, slower for times. The JSON floor "
              "of a round trip is two encodes and two decodes. A figure measured in rounds with its baseline "
              "(each round runs both) is divided round by round: its ratio is the median of the rounds' ratios.", ""]
    lines += ["| Baseline | median |", "|---|---:|"]
    for key, figure in figures.items():
        if key.startswith(("raw.", "zmq.", "json.", "nio.")):
            lines.append(f"| {figure['title']} | {format_figure(figure)} |")
    lines += ["", "| Target (issues 6, 13, 14, 15 and 34) | goal | now | met |", "|---|---|---:|:-:|"]
    for key, goal, check in TARGETS:
        met, now = check(figures)
        title = figures.get(key, {}).get("title", TARGET_TITLES.get(key, key))
        lines.append(f"| {title} | {goal} | {now} | {'–' if met is None else ('yes' if met else 'no')} |")
    note = busy_note(busy)
    if note:
        lines += ["", note]
    unavailable = [(f["title"], f["reason"]) for f in figures.values() if f.get("status") != "ok"]
    if unavailable:
        lines += ["", "Unavailable:"] + [f"- {title}: {reason}" for title, reason in unavailable]
    return "\n".join(lines)


def machine_busy(seconds=0.5):
    """How busy the whole machine was over `seconds` (percent of all its cores, from /proc/stat), or
    None where it cannot be read. Sampled while no measurement runs, it is what other processes use."""
    def times():
        # user nice system idle iowait irq softirq steal (guest time is counted in user already)
        fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        return sum(fields), fields[3] + fields[4]  # all, idle + iowait
    try:
        total_before, idle_before = times()
        time.sleep(seconds)
        total_after, idle_after = times()
    except (OSError, ValueError, IndexError):
        return None
    total = total_after - total_before
    return 100.0 * (total - (idle_after - idle_before)) / total if total > 0 else None


BUSY_WARNING_PERCENT = 25


def busy_note(samples):
    """A sentence on the other processes' load during a run (Suite.busy), or None when it stayed low."""
    values = [sample["percent"] for sample in samples or [] if sample.get("percent") is not None]
    if not values or max(values) < BUSY_WARNING_PERCENT:
        return None
    worst = max(samples, key=lambda sample: sample.get("percent") or 0)
    return (f"The machine was busy: other processes used up to {max(values):.0f} % of it between measurements "
            f"(before {worst['before']}). Load that slows PeerKit's threads more than a baseline's one moves a "
            f"ratio even when measured in rounds: run again on a quiet machine before believing a flag.")


def cpuinfo_fields(cpuinfo):
    """/proc/cpuinfo's `key: value` lines as a dictionary, the first CPU's value of each key."""
    fields = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_details(cpuinfo, cache_sizes):
    """What tells two machines with the same CPU name apart ("AMD EPYC" names several): the clock,
    the caches and whether the TLB keeps its entries across a switch of address space (`pcid`),
    from /proc/cpuinfo's text and the sizes of cpu0's caches by level. Empty parts are left out."""
    fields = cpuinfo_fields(cpuinfo)
    parts = []
    try:
        parts.append(f"{float(fields['cpu MHz']):.0f} MHz")
    except (KeyError, ValueError):
        pass
    parts += [f"L{level} {size}" for level, size in sorted(cache_sizes.items())]
    if "flags" in fields:
        parts.append("pcid" if "pcid" in fields["flags"].split() else "no pcid")
    return ", ".join(parts)


def cache_sizes():
    """cpu0's data and unified caches by level, as sysfs gives them ("512K")."""
    sizes = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            sizes[int((index / "level").read_text())] = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
    return sizes


def machine_description(python):
    cpu, details = "unknown CPU", ""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        cpu = cpuinfo_fields(cpuinfo).get("model name") or cpu
        details = cpu_details(cpuinfo, cache_sizes())
    except OSError:
        pass
    swift = subprocess.run(["swift", "--version"], capture_output=True, text=True).stdout.splitlines()
    zmq_version = subprocess.run([python, "-c", "import zmq; print(zmq.zmq_version(), zmq.__version__)"],
                                 capture_output=True, text=True).stdout.strip()
    return {"cpu": cpu, "cpuDetails": details, "cores": os.cpu_count(), "kernel": f"Linux {platform.release()}",
            "swift": swift[0].replace("Swift version ", "Swift ") if swift else "Swift (unknown)",
            "zeromq": zmq_version, "python": platform.python_version()}
