#!/usr/bin/env python3
"""Runs PeerKit's benchmarks and their baselines in one invocation; prints a Markdown table with
ratios and writes the figures as JSON. `scripts/bench` builds everything and calls this.

Every measurement is a pair of processes over 127.0.0.1 (or one process for the JSON floor): the
serving process prints {"event":"ready","port":P}, the other is started against that port, and the
measuring one prints one JSON object with its result. Each measurement runs --runs times in fresh
processes; the table shows the median and the spread (min–max) of the runs. Every process is
bounded in time and ended by its PID.
"""

import argparse
import datetime
import json
import os
import platform
import queue
import random
import shutil
import socket
import statistics
import string
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

# --------------------------------------------------------------------------------------------
# Processes


class BenchError(Exception):
    """A measurement could not be made; the run goes on and the figure is reported unavailable."""


class Process:
    """A child process whose stdout JSON lines are collected on a thread."""

    def __init__(self, command, label, stdin=False, env=None):
        self.label = label
        self.command = command
        self.lines = queue.Queue()
        self.stderr_tail = []
        self.popen = subprocess.Popen(command, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self):
        for line in self.popen.stdout:
            line = line.strip()
            if line.startswith("{"):
                try:
                    self.lines.put(json.loads(line))
                except json.JSONDecodeError:
                    pass
        self.lines.put(None)

    def _read_stderr(self):
        for line in self.popen.stderr:
            self.stderr_tail = (self.stderr_tail + [line.rstrip()])[-5:]

    def next_line(self, timeout, want=lambda line: True):
        """The next JSON line for which `want` holds; raises BenchError on timeout or exit."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BenchError(f"{self.label} printed nothing usable within {timeout:.0f} s{self._why()}")
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self.popen.wait(timeout=5)
                raise BenchError(f"{self.label} exited with status {self.popen.returncode} before its result{self._why()}")
            if want(line):
                return line

    def close_stdin(self):
        if self.popen.stdin:
            try:
                self.popen.stdin.close()
            except OSError:
                pass

    def end(self, grace=5):
        """Waits up to `grace` seconds for the process to exit, then ends it by its PID."""
        self.close_stdin()
        try:
            self.popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()

    def _why(self):
        return (": " + " / ".join(self.stderr_tail)) if self.stderr_tail else ""


# What makes one figure unavailable without ending the run.
FAILURES = (BenchError, KeyError, OSError, ValueError, subprocess.TimeoutExpired)


def is_ready(line):
    return line.get("event") == "ready"


def is_result(line):
    return "event" not in line


def pair(server, client, result_from="client", timeout=60):
    """Starts `server`, then `client` with {port}/{ports} filled in; returns the result line."""
    servers = Process(server, label=describe(server))
    processes = [servers]
    try:
        ready = servers.next_line(timeout=30, want=is_ready)
        filled = []
        for part in client:
            if part == "{ports}":
                filled += [f"127.0.0.1:{port}" for port in ready.get("ports", [ready["port"]])]
            else:
                filled.append(part.replace("{port}", str(ready["port"])))
        clients = Process(filled, label=describe(filled))
        processes.append(clients)
        source = clients if result_from == "client" else servers
        return source.next_line(timeout=timeout, want=is_result)
    finally:
        for process in reversed(processes):
            process.end()


def describe(command):
    """`rawbench sink`, `zmqbench.py push`, … for messages."""
    if command[0] == "taskset":
        command = command[3:]
    if command[0].endswith("python") or "/python" in command[0]:
        command = command[1:]
    return f"{Path(command[0]).name} {command[1]}"


def pinned(command, pin):
    return ["taskset", "-c", "0"] + command if pin else command


# --------------------------------------------------------------------------------------------
# Statistics


def summarize(samples):
    return {"samples": samples, "median": statistics.median(samples), "min": min(samples), "max": max(samples)}


def format_value(value, unit):
    if value is None:
        return "–"
    if unit == "msgs/s":
        return f"{value:,.0f}"
    if unit in ("MB/s",):
        return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"
    if unit in ("µs",):
        return f"{value:,.1f}"
    if unit == "ms":
        return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"
    return f"{value:.3g}"


def format_figure(figure):
    if figure is None or figure.get("status") != "ok":
        return "unavailable"
    unit = figure["unit"]
    text = f"{format_value(figure['median'], unit)} {unit}"
    if len(figure["samples"]) > 1:
        text += f" ({format_value(figure['min'], unit)}–{format_value(figure['max'], unit)})"
    return text


# --------------------------------------------------------------------------------------------
# The suite


class Suite:
    def __init__(self, args):
        self.args = args
        self.bin = Path(args.bin_dir)
        self.pkbench = str(self.bin / "peerkit-bench")
        self.raw = args.raw
        self.python = args.python
        self.zmq = str(Path(__file__).resolve().parent.parent / "zmq" / "zmqbench.py")
        self.figures = {}
        self.scale = 0.1 if args.quick else 1.0

    def n(self, count):
        return max(int(count * self.scale), 10)

    def log(self, text):
        print(text, file=sys.stderr, flush=True)

    def measure(self, key, title, unit, runs, one_run, lower_is_better=False):
        """Runs `one_run` (returning a number) `runs` times; records the figure or why it is unavailable."""
        if self.args.only and not any(key.startswith(prefix) for prefix in self.args.only):
            return
        samples = []
        started = time.monotonic()
        try:
            for _ in range(runs):
                samples.append(one_run())
        except FAILURES as error:
            self.figures[key] = {"title": title, "unit": unit, "status": "unavailable", "reason": str(error)}
            self.log(f"  {title}: unavailable: {error}")
            return
        figure = {"title": title, "unit": unit, "status": "ok", "lowerIsBetter": lower_is_better}
        figure.update(summarize(samples))
        self.figures[key] = figure
        self.log(f"  {title}: {format_figure(figure)} [{time.monotonic() - started:.1f} s]")

    def measure_many(self, keys, runs, one_run):
        """Like `measure` for a run that yields several figures at once: keys maps key → (title, unit, field, lower)."""
        if self.args.only and not any(key.startswith(prefix) for key in keys for prefix in self.args.only):
            return
        results = []
        try:
            for _ in range(runs):
                results.append(one_run())
        except FAILURES as error:
            for key, (title, unit, _, _) in keys.items():
                self.figures[key] = {"title": title, "unit": unit, "status": "unavailable", "reason": str(error)}
            self.log(f"  {', '.join(t for t, *_ in keys.values())}: unavailable: {error}")
            return
        for key, (title, unit, field, lower) in keys.items():
            figure = {"title": title, "unit": unit, "status": "ok", "lowerIsBetter": lower}
            figure.update(summarize([result[field] for result in results]))
            self.figures[key] = figure
            self.log(f"  {title}: {format_figure(figure)}")

    # ---- Raw C baseline

    def raw_throughput(self, size, count, batch, field):
        result = pair([self.raw, "sink", "--timeout", "60"],
                      [self.raw, "source", "--connect", "127.0.0.1:{port}", "--size", str(size),
                       "--count", str(count), "--batch", str(batch), "--timeout", "60"],
                      result_from="server")
        return result[field]

    def raw_rtt(self, pin):
        return pair(pinned([self.raw, "echo", "--timeout", "60"], pin),
                    pinned([self.raw, "ping", "--connect", "127.0.0.1:{port}", "--size", "100",
                            "--count", str(self.n(20000)), "--timeout", "60"], pin))

    # ---- pyzmq baseline

    def zmq_throughput(self, size, count, use_json, field):
        flag = ["--json"] if use_json else []
        result = pair([self.python, self.zmq, "pull", "--size", str(size), "--timeout", "90"] + flag,
                      [self.python, self.zmq, "push", "--connect", "127.0.0.1:{port}", "--size", str(size),
                       "--count", str(count), "--timeout", "90"] + flag,
                      result_from="server", timeout=90)
        return result[field]

    def zmq_rtt(self, use_json, pin):
        flag = ["--json"] if use_json else []
        return pair(pinned([self.python, self.zmq, "rep", "--size", "100", "--timeout", "90"] + flag, pin),
                    pinned([self.python, self.zmq, "req", "--connect", "127.0.0.1:{port}", "--size", "100",
                            "--count", str(self.n(20000)), "--timeout", "90"] + flag, pin), timeout=90)

    # ---- JSON floor

    def json_floor(self, size, count):
        process = Process([self.pkbench, "json-floor", "--size", str(size), "--count", str(count),
                           "--timeout", "60"], label="peerkit-bench json-floor")
        try:
            return process.next_line(timeout=60, want=is_result)
        finally:
            process.end()

    # ---- PeerKit

    def service_type(self):
        return "b" + "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(10))

    def peerkit_throughput(self, size, count, window, receivers=1):
        service = self.service_type()
        result = pair([self.pkbench, "sink", "--receivers", str(receivers), "--ack-every", str(window // 2),
                       "--service-type", service, "--timeout", "120"],
                      [self.pkbench, "source", "--connect", "{ports}", "--size", str(size), "--count", str(count),
                       "--window", str(window), "--service-type", service, "--timeout", "120"],
                      result_from="server", timeout=120)
        return result

    def peerkit_rtt(self, pin):
        service = self.service_type()
        return pair(pinned([self.pkbench, "echo", "--service-type", service, "--timeout", "120"], pin),
                    pinned([self.pkbench, "ping", "--connect", "127.0.0.1:{port}", "--size", "100",
                            "--count", str(self.n(20000)), "--service-type", service, "--timeout", "120"], pin),
                    timeout=120)

    def discovery_pair(self):
        """A fresh pair started together; the later of the two resume()→connected times."""
        service = self.service_type()
        first = Process([self.pkbench, "discovery-peer", "--name", "pair-a", "--service-type", service,
                         "--timeout", "30"], label="discovery-peer a", stdin=True)
        second = Process([self.pkbench, "discovery-peer", "--name", "pair-b", "--service-type", service,
                          "--timeout", "30"], label="discovery-peer b", stdin=True)
        try:
            connected = lambda line: line.get("event") == "connected"
            a = first.next_line(timeout=20, want=connected)
            b = second.next_line(timeout=20, want=connected)
            return max(a["seconds"], b["seconds"])
        finally:
            second.end()
            first.end()

    def discovery_join(self, iterations):
        service = self.service_type()
        anchor = Process([self.pkbench, "discovery-peer", "--name", "anchor", "--service-type", service,
                          "--timeout", "120"], label="discovery-peer anchor", stdin=True)
        try:
            anchor.next_line(timeout=20, want=is_ready)
            time.sleep(1.0)  # Let Avahi finish announcing the anchor: the figure is about joining an advertised peer.
            joiner = Process([self.pkbench, "join", "--iterations", str(iterations), "--service-type", service,
                              "--timeout", "90"], label="peerkit-bench join")
            try:
                return joiner.next_line(timeout=90, want=is_result)
            finally:
                joiner.end()
        finally:
            anchor.end()

    # ---- Listr

    def listr_binaries(self):
        listrd, listrctl = self.bin / "listrd", self.bin / "listrctl"
        for binary in (listrd, listrctl):
            if not binary.exists():
                raise BenchError(f"{binary} is missing; build it with `swift build -c release --product {binary.name}`")
        probe = subprocess.run([str(listrctl), "--help"], capture_output=True, text=True, timeout=10)
        if "item" not in probe.stdout + probe.stderr:
            raise BenchError("listrctl is a placeholder without the `item` commands")
        return str(listrd), str(listrctl)

    def with_listrd(self, body):
        """Starts listrd on a temporary store (advertised through Avahi, listening on 127.0.0.1 at a
        known port) and runs body(ctl, folder, port) once listrctl reaches it."""
        listrd, listrctl = self.listr_binaries()
        service = self.service_type()
        folder = Path(tempfile.mkdtemp(prefix="peerkit-bench-listr-"))
        port = free_port()
        daemon = Process([listrd, "--store", str(folder / "store.json"), "--service-type", service,
                          "--name", "bench-listrd", "--listen-host", "127.0.0.1", "--port", str(port)],
                         label="listrd")
        try:
            def ctl(*arguments, timeout=60):
                return subprocess.run([listrctl, "--service-type", service, "--timeout", "30"] + list(arguments),
                                      capture_output=True, text=True, timeout=timeout)
            deadline = time.monotonic() + 20
            while True:
                probe = ctl("item", "list")
                if probe.returncode == 0:
                    break
                if time.monotonic() > deadline or daemon.popen.poll() is not None:
                    raise BenchError(f"listrctl could not reach listrd: {(probe.stderr or probe.stdout).strip()[:300]}"
                                     f"{daemon._why()}")
            return body(ctl, folder, port)
        finally:
            daemon.popen.terminate()
            daemon.end(grace=10)
            shutil.rmtree(folder, ignore_errors=True)

    # How listrctl finds the daemon, for the CLI figure: the plain command discovers it through
    # Avahi; --peer names it (no wait for other daemons); --connect dials it directly.
    CLI_VARIANTS = {
        "listr.cli": ("listrctl item list (wall)", []),
        "listr.cli.peer": ("listrctl --peer NAME item list (wall)", ["--peer", "bench-listrd"]),
        "listr.cli.connect": ("listrctl --connect HOST:PORT item list (wall)", ["--connect", "127.0.0.1:{port}"]),
    }

    def listr_cli(self, runs):
        """Wall milliseconds of `listrctl item list` against a store of 10 items, per variant."""
        def body(ctl, folder, port):
            for index in range(10):
                added = ctl("item", "add", f"Item {index}")
                if added.returncode != 0:
                    raise BenchError(f"listrctl item add failed: {(added.stderr or added.stdout).strip()[:300]}")
            results = {}
            for key, (_, options) in self.CLI_VARIANTS.items():
                options = [option.replace("{port}", str(port)) for option in options]
                samples = []
                for _ in range(runs):
                    begin = time.monotonic()
                    listed = ctl(*options, "item", "list")
                    samples.append((time.monotonic() - begin) * 1000)
                    if listed.returncode != 0:
                        samples = f"listrctl {' '.join(options)} item list failed: {(listed.stderr or listed.stdout).strip()[:300]}"
                        break
                results[key] = samples
            return results
        return self.with_listrd(body)

    def listr_dump(self, megabytes, runs):
        def body(ctl, folder, port):
            plist = folder / "big.plist"
            write_store_plist(plist, megabytes * 1024 * 1024)
            replaced = ctl("store", "replace", str(plist), timeout=120)
            if replaced.returncode != 0:
                raise BenchError(f"listrctl store replace of a {megabytes} MiB property list failed: "
                                 f"{(replaced.stderr or replaced.stdout).strip()[:300]}")
            rates = []
            for run in range(runs):
                out = folder / f"dump-{run}.plist"
                begin = time.monotonic()
                dumped = ctl("store", "dump", str(out), timeout=120)
                seconds = time.monotonic() - begin
                if dumped.returncode != 0:
                    raise BenchError(f"listrctl store dump failed: {(dumped.stderr or dumped.stdout).strip()[:300]}")
                rates.append(out.stat().st_size / seconds / 1e6)
                out.unlink()
            return rates
        return self.with_listrd(body)

    # ---- Everything

    def run(self):
        runs = self.args.runs
        n = self.n
        self.log("Baselines: raw C")
        self.measure("raw.tput.100.single", "raw 100 B, one write per frame", "msgs/s", runs,
                     lambda: self.raw_throughput(100, n(1_000_000), 1, "msgsPerSec"))
        self.measure("raw.tput.100.batched", "raw 100 B, 64 frames per write", "msgs/s", runs,
                     lambda: self.raw_throughput(100, n(5_000_000), 64, "msgsPerSec"))
        self.measure("raw.tput.64k", "raw 64 KiB", "MB/s", runs, lambda: self.raw_throughput(65536, n(30_000), 1, "MBps"))
        self.measure("raw.tput.4m", "raw 4 MiB", "MB/s", runs, lambda: self.raw_throughput(4 << 20, n(400), 1, "MBps"))
        for pin, label in ((True, "pinned"), (False, "unpinned")):
            self.measure_many({f"raw.rtt.{label}.p50": (f"raw RTT p50, {label}", "µs", "p50us", True),
                               f"raw.rtt.{label}.p99": (f"raw RTT p99, {label}", "µs", "p99us", True)},
                              runs, lambda pin=pin: self.raw_rtt(pin))

        self.log("Baselines: pyzmq")
        self.measure("zmq.tput.100.bytes", "pyzmq PUSH/PULL 100 B", "msgs/s", runs,
                     lambda: self.zmq_throughput(100, n(500_000), False, "msgsPerSec"))
        self.measure("zmq.tput.100.json", "pyzmq PUSH/PULL 100 B, send_json", "msgs/s", runs,
                     lambda: self.zmq_throughput(100, n(200_000), True, "msgsPerSec"))
        self.measure("zmq.tput.64k", "pyzmq PUSH/PULL 64 KiB", "MB/s", runs,
                     lambda: self.zmq_throughput(65536, n(30_000), False, "MBps"))
        self.measure("zmq.tput.4m", "pyzmq PUSH/PULL 4 MiB", "MB/s", runs,
                     lambda: self.zmq_throughput(4 << 20, n(400), False, "MBps"))
        for use_json, kind in ((False, "bytes"), (True, "json")):
            for pin, label in ((True, "pinned"), (False, "unpinned")):
                suffix = ", send_json" if use_json else ""
                self.measure_many({f"zmq.rtt.{kind}.{label}.p50": (f"pyzmq REQ/REP p50{suffix}, {label}", "µs", "p50us", True),
                                   f"zmq.rtt.{kind}.{label}.p99": (f"pyzmq REQ/REP p99{suffix}, {label}", "µs", "p99us", True)},
                                  runs, lambda use_json=use_json, pin=pin: self.zmq_rtt(use_json, pin))

        self.log("Baselines: JSON floor (Foundation JSONEncoder + JSONDecoder of the envelope)")
        self.measure_many({"json.floor.100": ("JSON floor 100 B", "msgs/s", "msgsPerSec", False),
                           "json.floor.100.us": ("JSON floor 100 B, encode+decode", "µs", "microsecondsPerMessage", True)},
                          runs, lambda: self.json_floor(100, n(200_000)))
        self.measure("json.floor.64k", "JSON floor 64 KiB", "MB/s", runs, lambda: self.json_floor(65536, n(3_000))["MBps"])
        self.measure("json.floor.4m", "JSON floor 4 MiB", "MB/s", runs, lambda: self.json_floor(4 << 20, n(40))["MBps"])

        self.log("PeerKit")
        self.measure("pk.tput.100", "PeerKit 100 B one-way (typed handler)", "msgs/s", runs,
                     lambda: self.peerkit_throughput(100, n(self.args.peerkit_messages), 20_000)["msgsPerSec"])
        self.measure("pk.tput.64k", "PeerKit 64 KiB one-way", "MB/s", runs,
                     lambda: self.peerkit_throughput(65536, n(6_000), 64)["MBps"])
        self.measure("pk.tput.4m", "PeerKit 4 MiB one-way", "MB/s", runs,
                     lambda: self.peerkit_throughput(4 << 20, n(100), 4)["MBps"])
        for pin, label in ((True, "pinned"), (False, "unpinned")):
            self.measure_many({f"pk.rtt.{label}.p50": (f"PeerKit request/reply p50, {label}", "µs", "p50us", True),
                               f"pk.rtt.{label}.p99": (f"PeerKit request/reply p99, {label}", "µs", "p99us", True)},
                              runs, lambda pin=pin: self.peerkit_rtt(pin))
        for receivers in (1, 4, 16):
            self.measure(f"pk.fanout.{receivers}", f"PeerKit broadcast to {receivers}, per receiver", "msgs/s", runs,
                         lambda receivers=receivers: self.peerkit_throughput(
                             100, n(self.args.peerkit_messages // receivers), 20_000, receivers)["msgsPerSec"])

        self.log("PeerKit discovery (Avahi)")
        self.measure("pk.discovery.pair", "fresh pair, resume() → connected", "ms", 1,
                     lambda: statistics.median([self.discovery_pair() * 1000 for _ in range(max(runs, 5))]), True)
        self.measure_join()

        self.log("Listr")
        self.measure_cli()
        self.measure("listr.dump", "listrctl store dump, 64 MiB store", "MB/s", 1,
                     lambda: statistics.median(self.listr_dump(64 if not self.args.quick else 4, 3)))

    def measure_join(self):
        if self.args.only and not any("pk.discovery.join".startswith(p) for p in self.args.only):
            return
        try:
            result = self.discovery_join(max(self.args.runs, 5) + 1)
            samples = [s * 1000 for s in result["samples"]]
            figure = {"title": "new transceiver joins an advertised peer", "unit": "ms", "status": "ok",
                      "lowerIsBetter": True}
            figure.update(summarize(samples))
            self.figures["pk.discovery.join"] = figure
            self.log(f"  {figure['title']}: {format_figure(figure)}")
        except FAILURES as error:
            self.figures["pk.discovery.join"] = {"title": "new transceiver joins an advertised peer", "unit": "ms",
                                                 "status": "unavailable", "reason": str(error)}
            self.log(f"  join: unavailable: {error}")

    def measure_cli(self):
        if self.args.only and not any(key.startswith(p) for key in self.CLI_VARIANTS for p in self.args.only):
            return
        try:
            results = self.listr_cli(20 if not self.args.quick else 5)
        except FAILURES as error:
            results = {key: str(error) for key in self.CLI_VARIANTS}
        for key, (title, _) in self.CLI_VARIANTS.items():
            samples = results[key]
            if isinstance(samples, str):
                self.figures[key] = {"title": title, "unit": "ms", "status": "unavailable", "reason": samples}
                self.log(f"  {title}: unavailable: {samples}")
                continue
            figure = {"title": title, "unit": "ms", "status": "ok", "lowerIsBetter": True}
            figure.update(summarize(samples))
            self.figures[key] = figure
            self.log(f"  {title}: {format_figure(figure)}")


def free_port():
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write_store_plist(path, size):
    """Writes an XML property list of about `size` bytes in Listr's dump format: an array of dicts
    with `id` (UUID string), `title` and `done`."""
    title = "Buy " + "milk and bread " * 60  # about 900 bytes per item
    with open(path, "w", encoding="utf-8") as out:
        out.write('<?xml version="1.0" encoding="UTF-8"?>\n'
                  '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
                  '<plist version="1.0">\n<array>\n')
        written = 0
        index = 0
        while written < size:
            item = (f"\t<dict>\n\t\t<key>done</key>\n\t\t<{'true' if index % 3 == 0 else 'false'}/>\n"
                    f"\t\t<key>id</key>\n\t\t<string>{str(uuid.uuid4()).upper()}</string>\n"
                    f"\t\t<key>title</key>\n\t\t<string>{title}{index}</string>\n\t</dict>\n")
            out.write(item)
            written += len(item)
            index += 1
        out.write("</array>\n</plist>\n")


# --------------------------------------------------------------------------------------------
# Ratios and the report

# Each PeerKit figure against its baselines: (PeerKit key, [(column, baseline key, transform)]).
# A transform turns the baseline into the same unit (the JSON floor of a round trip is two
# encodes and two decodes, for example).
RATIOS = [
    ("pk.tput.100", [("raw", "raw.tput.100.single"), ("raw batched", "raw.tput.100.batched"),
                     ("pyzmq", "zmq.tput.100.bytes"), ("pyzmq JSON", "zmq.tput.100.json"),
                     ("JSON floor", "json.floor.100")]),
    ("pk.tput.64k", [("raw", "raw.tput.64k"), ("pyzmq", "zmq.tput.64k"), ("JSON floor", "json.floor.64k")]),
    ("pk.tput.4m", [("raw", "raw.tput.4m"), ("pyzmq", "zmq.tput.4m"), ("JSON floor", "json.floor.4m")]),
    ("pk.rtt.pinned.p50", [("raw", "raw.rtt.pinned.p50"), ("pyzmq", "zmq.rtt.bytes.pinned.p50"),
                           ("pyzmq JSON", "zmq.rtt.json.pinned.p50"), ("JSON floor", "json.floor.100.us×2")]),
    ("pk.rtt.pinned.p99", [("raw", "raw.rtt.pinned.p99"), ("pyzmq", "zmq.rtt.bytes.pinned.p99"),
                           ("pyzmq JSON", "zmq.rtt.json.pinned.p99")]),
    ("pk.rtt.unpinned.p50", [("raw", "raw.rtt.unpinned.p50"), ("pyzmq", "zmq.rtt.bytes.unpinned.p50"),
                             ("pyzmq JSON", "zmq.rtt.json.unpinned.p50"), ("JSON floor", "json.floor.100.us×2")]),
    ("pk.rtt.unpinned.p99", [("raw", "raw.rtt.unpinned.p99"), ("pyzmq", "zmq.rtt.bytes.unpinned.p99"),
                             ("pyzmq JSON", "zmq.rtt.json.unpinned.p99")]),
    ("pk.fanout.1", [("raw", "raw.tput.100.single"), ("pyzmq", "zmq.tput.100.bytes"), ("JSON floor", "json.floor.100")]),
    ("pk.fanout.4", [("raw", "raw.tput.100.single"), ("pyzmq", "zmq.tput.100.bytes"), ("JSON floor", "json.floor.100")]),
    ("pk.fanout.16", [("raw", "raw.tput.100.single"), ("pyzmq", "zmq.tput.100.bytes"), ("JSON floor", "json.floor.100")]),
]
RATIO_COLUMNS = ["raw", "raw batched", "pyzmq", "pyzmq JSON", "JSON floor"]

# Issue 6's targets: (key, description, check on the figures → (met, where it stands)).
TARGETS = [
    ("pk.tput.100", "≥ 0.5× pyzmq PUSH/PULL bytes",
     lambda f: ratio_target(f, "pk.tput.100", "zmq.tput.100.bytes", lambda r: r >= 0.5)),
    ("pk.rtt.pinned.p50", "≤ 2× raw ping-pong (one core)",
     lambda f: ratio_target(f, "pk.rtt.pinned.p50", "raw.rtt.pinned.p50", lambda r: r <= 2)),
    ("listr.cli", "≤ 30 ms", lambda f: absolute_target(f, "listr.cli", lambda v: v <= 30)),
    ("pk.discovery.pair", "≤ 1.2 s", lambda f: absolute_target(f, "pk.discovery.pair", lambda v: v <= 1200)),
    ("pk.discovery.join", "≤ 50 ms", lambda f: absolute_target(f, "pk.discovery.join", lambda v: v <= 50)),
    ("listr.dump", "≥ 300 MB/s", lambda f: absolute_target(f, "listr.dump", lambda v: v >= 300)),
]


TARGET_TITLES = {
    "pk.tput.100": "PeerKit 100 B one-way", "pk.rtt.pinned.p50": "PeerKit request/reply p50, pinned",
    "listr.cli": "listrctl item list", "pk.discovery.pair": "fresh pair, resume() → connected",
    "pk.discovery.join": "new transceiver joins an advertised peer", "listr.dump": "store dump, 64 MiB",
}


def baseline_value(figures, key):
    if key.endswith("×2"):
        figure = figures.get(key[:-2])
        return figure["median"] * 2 if figure and figure.get("status") == "ok" else None
    figure = figures.get(key)
    return figure["median"] if figure and figure.get("status") == "ok" else None


def ratio_target(figures, key, baseline, check):
    mine, theirs = baseline_value(figures, key), baseline_value(figures, baseline)
    if mine is None or theirs is None:
        return None, "not measured"
    ratio = mine / theirs
    return check(ratio), f"{ratio:.2f}×"


def absolute_target(figures, key, check):
    value = baseline_value(figures, key)
    if value is None:
        return None, "not measured"
    return check(value), format_value(value, figures[key]["unit"]) + " " + figures[key]["unit"]


def compute_ratios(figures):
    ratios = {}
    for key, columns in RATIOS:
        mine = baseline_value(figures, key)
        for column, baseline in columns:
            theirs = baseline_value(figures, baseline)
            if mine is not None and theirs:
                ratios.setdefault(key, {})[column] = mine / theirs
    return ratios


def markdown(figures, ratios, machine, runs):
    lines = [f"PeerKit benchmarks — {machine['cpu']}, {machine['cores']} cores, {machine['kernel']}, "
             f"{machine['swift']}; median of {runs} runs in fresh processes (min–max of the runs in brackets).", ""]
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
              "of a round trip is two encodes and two decodes.", ""]
    lines += ["| Baseline | median |", "|---|---:|"]
    for key, figure in figures.items():
        if key.startswith(("raw.", "zmq.", "json.")):
            lines.append(f"| {figure['title']} | {format_figure(figure)} |")
    lines += ["", "| Target (issue 6) | goal | now | met |", "|---|---|---:|:-:|"]
    for key, goal, check in TARGETS:
        met, now = check(figures)
        title = figures.get(key, {}).get("title", TARGET_TITLES.get(key, key))
        lines.append(f"| {title} | {goal} | {now} | {'–' if met is None else ('yes' if met else 'no')} |")
    unavailable = [(f["title"], f["reason"]) for f in figures.values() if f.get("status") != "ok"]
    if unavailable:
        lines += ["", "Unavailable:"] + [f"- {title}: {reason}" for title, reason in unavailable]
    return "\n".join(lines)


def machine_description(python):
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    swift = subprocess.run(["swift", "--version"], capture_output=True, text=True).stdout.splitlines()
    zmq_version = subprocess.run([python, "-c", "import zmq; print(zmq.zmq_version(), zmq.__version__)"],
                                 capture_output=True, text=True).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": f"Linux {platform.release()}",
            "swift": swift[0].replace("Swift version ", "Swift ") if swift else "Swift (unknown)",
            "zeromq": zmq_version, "python": platform.python_version()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin-dir", required=True, help="where the release peerkit-bench (and listrd, listrctl) are")
    parser.add_argument("--raw", required=True, help="the compiled rawbench")
    parser.add_argument("--python", required=True, help="a Python with pyzmq")
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (fresh processes each)")
    parser.add_argument("--peerkit-messages", type=int, default=300_000, help="messages per PeerKit 100 B run")
    parser.add_argument("--quick", action="store_true", help="a tenth of the messages, to try the harness")
    parser.add_argument("--only", nargs="*", help="key prefixes to run, e.g. raw. pk.rtt")
    parser.add_argument("--out-dir", default="bench-results")
    args = parser.parse_args()

    machine = machine_description(args.python)
    suite = Suite(args)
    started = time.monotonic()
    suite.run()
    ratios = compute_ratios(suite.figures)
    print(markdown(suite.figures, ratios, machine, args.runs))
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = out_dir / f"{stamp}.json"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out.write_text(json.dumps({"timestamp": stamp, "commit": commit, "machine": machine, "runs": args.runs,
                               "quick": args.quick, "seconds": time.monotonic() - started,
                               "figures": suite.figures, "ratios": ratios}, indent=2, ensure_ascii=False) + "\n")
    print(f"\nWrote {out} ({time.monotonic() - started:.0f} s).", file=sys.stderr)


if __name__ == "__main__":
    main()
