"""The measurements: baselines first, then PeerKit, discovery and Listr."""

import random
import shutil
import socket
import statistics
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import listr_bench
import mesh
from listr_store import write_store_plist
from processes import FAILURES, BenchError, Process, is_ready, is_result, pair, pinned
from report import machine_busy
from stats import format_figure, summarize


class Suite:
    def __init__(self, args):
        self.args = args
        self.bin = Path(args.bin_dir)
        self.pkbench = str(self.bin / "peerkit-bench")
        self.tools = Path(args.tools_dir or args.bin_dir)
        self.raw = args.raw
        self.python = args.python
        self.zmq = str(Path(__file__).resolve().parent.parent / "zmq" / "zmqbench.py")
        self.figures = {}
        self.scale = 0.1 if args.quick else 1.0
        # What other processes used of the machine before each group of rounds (report.machine_busy).
        self.busy = []
        self.machine_busy = machine_busy

    def n(self, count):
        return max(int(count * self.scale), 10)

    def log(self, text):
        print(text, file=sys.stderr, flush=True)

    def selected(self, keys):
        """Whether --only chose any of `keys` (everything is chosen without --only)."""
        return not self.args.only or any(key.startswith(prefix) for key in keys for prefix in self.args.only)

    def measure(self, key, title, unit, runs, one_run, lower_is_better=False):
        """Runs `one_run` (returning a number) `runs` times; records the figure or why it is unavailable."""
        self.measure_many({key: (title, unit, None, lower_is_better)}, runs, one_run)

    def measure_many(self, keys, runs, one_run):
        """Like `measure` for a run that yields several figures at once: keys maps key → (title, unit, field, lower)."""
        self.measure_rounds(None, [(keys, one_run)], runs)

    def measure_rounds(self, group, specs, runs):
        """Measures several figures in rounds: each round runs every one of `specs`, (keys, one_run)
        as `measure_many` takes them (a field of None: one_run returns the figure itself), once, in
        an order turned by one each round. Sample i of every figure then comes from round i, within
        seconds of the other figures' sample i: a ratio of two figures of one `group` is taken round
        by round (report.ratio_range), so that what the machine's other tenants do in a stretch of
        time falls on both sides of it. A spec that fails is unavailable; the others go on."""
        specs = [(keys, one_run) for keys, one_run in specs if self.selected(keys)]
        if group is not None and specs:
            self.busy.append({"before": group, "percent": self.machine_busy()})
        results = [[] for _ in specs]
        failures = {}
        started = time.monotonic()
        for round_index in range(runs):
            for turn in range(len(specs)):
                index = (turn + round_index) % len(specs)
                if index in failures:
                    continue
                try:
                    results[index].append(specs[index][1]())
                except FAILURES as error:
                    failures[index] = error
        for index, (keys, _) in enumerate(specs):
            if index in failures:
                for key, (title, unit, _, _) in keys.items():
                    self.figures[key] = {"title": title, "unit": unit, "status": "unavailable", "reason": str(failures[index])}
                self.log(f"  {', '.join(title for title, *_ in keys.values())}: unavailable: {failures[index]}")
                continue
            for key, (title, unit, field, lower) in keys.items():
                figure = {"title": title, "unit": unit, "status": "ok", "lowerIsBetter": lower}
                if group is not None:
                    figure["pairedIn"] = group
                # A field may hold several samples of one run (the mesh's idle windows).
                samples = []
                for result in results[index]:
                    value = result if field is None else result[field]
                    samples.extend(value if isinstance(value, list) else [value])
                figure.update(summarize(samples))
                self.figures[key] = figure
                self.log(f"  {title}: {format_figure(figure)}")
        if group is not None and specs:
            self.log(f"  (rounds of {group}: {time.monotonic() - started:.1f} s)")

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

    # ---- Bare SwiftNIO baseline

    def nio_rtt(self, pin, hand_off):
        """Request/reply in bare SwiftNIO (`peerkit-bench nio-echo` and `nio-ping`): in the channel
        handlers (`none`), or with each request and reply handed to a Swift task on the connection's
        event loop (`loop-task`) or on the global executor (`task`)."""
        flag = ["--hand-off", hand_off]
        return pair(pinned([self.pkbench, "nio-echo", "--timeout", "60"] + flag, pin),
                    pinned([self.pkbench, "nio-ping", "--connect", "127.0.0.1:{port}", "--size", "100",
                            "--count", str(self.n(20000)), "--timeout", "60"] + flag, pin))

    # ---- pyzmq baseline

    def zmq_throughput(self, size, count, use_json, field):
        flag = ["--json"] if use_json else []
        result = pair([self.python, self.zmq, "pull", "--size", str(size), "--timeout", "90"] + flag,
                      [self.python, self.zmq, "push", "--connect", "127.0.0.1:{port}", "--size", str(size),
                       "--count", str(count), "--timeout", "90"] + flag,
                      result_from="server", timeout=90)
        return result[field]

    def zmq_fanout(self, subscribers, count):
        result = pair([self.python, self.zmq, "pub", "--subscribers", str(subscribers), "--size", "100",
                       "--count", str(count), "--timeout", "90"],
                      [self.python, self.zmq, "sub", "--connect", "127.0.0.1:{port}", "--subscribers", str(subscribers),
                       "--timeout", "90"],
                      result_from="client", timeout=90)
        if result["messages"] != count:
            raise BenchError(f"a pyzmq subscriber got {result['messages']} of {count} messages")
        return result["msgsPerSec"]

    def zmq_rtt(self, use_json, pin):
        flag = ["--json"] if use_json else []
        return pair(pinned([self.python, self.zmq, "rep", "--size", "100", "--timeout", "90"] + flag, pin),
                    pinned([self.python, self.zmq, "req", "--connect", "127.0.0.1:{port}", "--size", "100",
                            "--count", str(self.n(20000)), "--timeout", "90"] + flag, pin), timeout=90)

    # ---- JSON floor

    def json_floor(self, size, count, codec="foundation"):
        process = Process([self.pkbench, "json-floor", "--size", str(size), "--count", str(count),
                           "--codec", codec, "--timeout", "60"], label=f"peerkit-bench json-floor ({codec})")
        try:
            return process.next_line(timeout=60, want=is_result)
        finally:
            process.end()

    # ---- PeerKit

    def service_type(self):
        return "b" + "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(10))

    def peerkit_throughput(self, size, count, window, receivers=1, api="broadcast", security="none", sessions=False,
                           own_coding=False):
        service = self.service_type()
        own = own_coding_option(own_coding)
        result = pair([self.pkbench, "sink", "--receivers", str(receivers), "--ack-every", str(window // 2),
                       "--service-type", service, "--timeout", "120", *security_option(security),
                       *sessions_option(sessions), *own],
                      [self.pkbench, "source", "--connect", "{ports}", "--size", str(size), "--count", str(count),
                       "--window", str(window), "--api", api, "--service-type", service, "--timeout", "120",
                       *security_option(security), *sessions_option(sessions), *own],
                      result_from="server", timeout=120)
        return result

    def peerkit_rtt(self, pin, security="none", sessions=False, one_loop=False, own_coding=False, immediate=False):
        service = self.service_type()
        loop = ["--one-loop"] if one_loop else []
        own = own_coding_option(own_coding)
        # The echo answers with respondImmediately, on the event loop as each request is read.
        answer = ["--immediate"] if immediate else []
        return pair(pinned([self.pkbench, "echo", "--service-type", service, "--timeout", "120",
                            *security_option(security), *sessions_option(sessions), *loop, *own, *answer], pin),
                    pinned([self.pkbench, "ping", "--connect", "127.0.0.1:{port}", "--size", "100",
                            "--count", str(self.n(20000)), "--service-type", service, "--timeout", "120",
                            *security_option(security), *sessions_option(sessions), *loop, *own], pin),
                    timeout=120)

    def peerkit_resource(self, size):
        service = self.service_type()
        return pair([self.pkbench, "resource-sink", "--service-type", service, "--timeout", "300"],
                    [self.pkbench, "resource-source", "--connect", "127.0.0.1:{port}", "--size", str(size),
                     "--service-type", service, "--timeout", "300"],
                    result_from="client", timeout=300)

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
        listrd, listrctl = self.tools / "listrd", self.tools / "listrctl"
        for binary in (listrd, listrctl):
            if not binary.exists():
                raise BenchError(f"{binary} is missing; build it as scripts/bench does")
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
        daemon = Process([listrd, "--store", str(folder / "store.sqlite"), "--service-type", service,
                          "--name", "bench-listrd", "--listen-host", "127.0.0.1", "--port", str(port)],
                         label="listrd")
        try:
            def ctl(*arguments, options=(), timeout=60):
                # listrctl takes its options after the subcommand: `listrctl item list --service-type T`.
                return subprocess.run([listrctl, *arguments, "--service-type", service, "--timeout", "30", *options],
                                      capture_output=True, text=True, timeout=timeout)
            ctl.listrctl, ctl.service = listrctl, service
            deadline = time.monotonic() + 20
            while True:
                probe = ctl("item", "list")
                if probe.returncode == 0:
                    break
                if time.monotonic() > deadline or daemon.popen.poll() is not None:
                    raise BenchError(f"listrctl could not reach listrd: {one_line(probe)}")
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
                    raise BenchError(f"listrctl item add failed: {one_line(added)}")
            results = {}
            for key, (_, options) in self.CLI_VARIANTS.items():
                options = [option.replace("{port}", str(port)) for option in options]
                samples = []
                for _ in range(runs):
                    begin = time.monotonic()
                    listed = ctl("item", "list", options=options)
                    samples.append((time.monotonic() - begin) * 1000)
                    if listed.returncode != 0:
                        samples = f"listrctl item list {' '.join(options)} failed: {one_line(listed)}"
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
                raise BenchError(f"listrctl store replace of a {megabytes} MiB property list failed: {one_line(replaced)}")
            rates = []
            for run in range(runs):
                out = folder / f"dump-{run}.plist"
                begin = time.monotonic()
                dumped = ctl("store", "dump", str(out), timeout=120)
                seconds = time.monotonic() - begin
                if dumped.returncode != 0:
                    raise BenchError(f"listrctl store dump failed: {one_line(dumped)}")
                rates.append(out.stat().st_size / seconds / 1e6)
                out.unlink()
            return rates
        return self.with_listrd(body)

    # ---- Everything

    def run(self):
        runs = self.args.runs
        n = self.n
        # The figures whose ratios issue 34's goals and the reference watch are measured in rounds
        # with their baselines (measure_rounds): each round runs every figure of the group once.
        self.log("Baselines: raw C")
        self.measure("raw.tput.100.batched", "raw 100 B, 64 frames per write", "msgs/s", runs,
                     lambda: self.raw_throughput(100, n(5_000_000), 64, "msgsPerSec"))
        self.measure("raw.tput.64k", "raw 64 KiB", "MB/s", runs, lambda: self.raw_throughput(65536, n(30_000), 1, "MBps"))
        self.measure("raw.tput.4m", "raw 4 MiB", "MB/s", runs, lambda: self.raw_throughput(4 << 20, n(400), 1, "MBps"))

        self.log("Baselines: pyzmq")
        self.measure("zmq.tput.64k", "pyzmq PUSH/PULL 64 KiB", "MB/s", runs,
                     lambda: self.zmq_throughput(65536, n(30_000), False, "MBps"))
        self.measure("zmq.tput.4m", "pyzmq PUSH/PULL 4 MiB", "MB/s", runs,
                     lambda: self.zmq_throughput(4 << 20, n(400), False, "MBps"))
        for subscribers in (1, 4, 16):
            self.measure(f"zmq.fanout.{subscribers}", f"pyzmq XPUB/SUB 100 B to {subscribers}, per subscriber", "msgs/s", runs,
                         lambda subscribers=subscribers: self.zmq_fanout(subscribers, n(self.args.peerkit_messages // subscribers)))

        self.log("PeerKit's JSON codec (PeerKitJSON) against the JSON floor (Foundation JSONEncoder + JSONDecoder "
                 "of the envelope), in rounds")
        self.measure_rounds("json.100", [
            ({"json.floor.100": ("JSON floor 100 B", "msgs/s", "msgsPerSec", False),
              "json.floor.100.us": ("JSON floor 100 B, encode+decode", "µs", "microsecondsPerMessage", True)},
             lambda: self.json_floor(100, n(200_000))),
            ({"pk.json.100": ("PeerKit JSON codec 100 B", "msgs/s", "msgsPerSec", False),
              "pk.json.100.us": ("PeerKit JSON codec 100 B, encode+decode", "µs", "microsecondsPerMessage", True)},
             lambda: self.json_floor(100, n(200_000), "peerkit")),
            ({"direct.json.100": ("no Codable: the envelope written and read by hand, 100 B", "msgs/s", "msgsPerSec", False),
              "direct.json.100.us": ("no Codable, 100 B, encode+decode", "µs", "microsecondsPerMessage", True)},
             lambda: self.json_floor(100, n(200_000), "direct")),
        ], runs)
        for what, size, count in (("64k", 65536, 3_000), ("4m", 4 << 20, 40)):
            label = "64 KiB" if what == "64k" else "4 MiB"
            self.measure_rounds(f"json.{what}", [
                single(f"json.floor.{what}", f"JSON floor {label}", "MB/s",
                       lambda size=size, count=count: self.json_floor(size, n(count))["MBps"]),
                single(f"pk.json.{what}", f"PeerKit JSON codec {label}", "MB/s",
                       lambda size=size, count=count: self.json_floor(size, n(count), "peerkit")["MBps"]),
            ], runs)

        self.log("PeerKit 100 B one-way, with raw C and pyzmq, in rounds")
        self.measure_rounds("tput.100", [
            single("raw.tput.100.single", "raw 100 B, one write per frame", "msgs/s",
                   lambda: self.raw_throughput(100, n(1_000_000), 1, "msgsPerSec")),
            single("zmq.tput.100.bytes", "pyzmq PUSH/PULL 100 B", "msgs/s",
                   lambda: self.zmq_throughput(100, n(500_000), False, "msgsPerSec")),
            single("zmq.tput.100.json", "pyzmq PUSH/PULL 100 B, send_json", "msgs/s",
                   lambda: self.zmq_throughput(100, n(200_000), True, "msgsPerSec")),
            single("pk.tput.100", "PeerKit 100 B one-way, broadcast", "msgs/s",
                   lambda: self.peerkit_throughput(100, n(self.args.peerkit_messages), 20_000)["msgsPerSec"]),
            single("pk.tput.100.send", "PeerKit 100 B one-way, send(_:to:)", "msgs/s",
                   lambda: self.peerkit_throughput(100, n(self.args.peerkit_messages), 20_000, api="send")["msgsPerSec"]),
            # The same with a payload type that writes and reads its own JSON (PeerPayloadCodable):
            # what the protocol saves over Codable, in the same rounds.
            single("pk.tput.100.own", "PeerKit 100 B one-way, broadcast, own payload coding", "msgs/s",
                   lambda: self.peerkit_throughput(100, n(self.args.peerkit_messages), 20_000, own_coding=True)["msgsPerSec"]),
            single("pk.tput.100.send.own", "PeerKit 100 B one-way, send(_:to:), own payload coding", "msgs/s",
                   lambda: self.peerkit_throughput(100, n(self.args.peerkit_messages), 20_000, api="send",
                                                   own_coding=True)["msgsPerSec"]),
        ], runs)
        self.log("PeerKit 64 KiB and 4 MiB one-way")
        self.measure("pk.tput.64k", "PeerKit 64 KiB one-way", "MB/s", runs,
                     lambda: self.peerkit_throughput(65536, n(6_000), 64)["MBps"])
        self.measure("pk.tput.4m", "PeerKit 4 MiB one-way", "MB/s", runs,
                     lambda: self.peerkit_throughput(4 << 20, n(100), 4)["MBps"])

        # The one-event-loop figures (pk.rtt.loop): handlers and the requester on the transceiver's
        # one event loop (EventLoopTaskExecutor), what the default's thread hand-offs cost.
        for pin, label in ((True, "pinned"), (False, "unpinned")):
            self.log(f"PeerKit request/reply, {label}, with raw C, bare SwiftNIO and pyzmq, in rounds")
            specs = [({f"raw.rtt.{label}.p50": (f"raw RTT p50, {label}", "µs", "p50us", True),
                       f"raw.rtt.{label}.p99": (f"raw RTT p99, {label}", "µs", "p99us", True)},
                      lambda pin=pin: self.raw_rtt(pin))]
            # Request/reply's floors in bare SwiftNIO: NIO's pipeline on one loop alone, with Swift
            # tasks on that loop (as PeerKit on one loop), and with the hand-offs to Swift tasks off
            # the loop that PeerKit's default makes.
            for hand_off, kind, what in (("none", "loop", "one event loop"),
                                         ("loop-task", "looptask", "Swift tasks on the loop"),
                                         ("task", "tasks", "handed to Swift tasks")):
                specs.append(({f"nio.rtt.{kind}.{label}.p50": (f"bare NIO RTT p50, {what}, {label}", "µs", "p50us", True),
                               f"nio.rtt.{kind}.{label}.p99": (f"bare NIO RTT p99, {what}, {label}", "µs", "p99us", True)},
                              lambda pin=pin, hand_off=hand_off: self.nio_rtt(pin, hand_off)))
            for use_json, kind in ((False, "bytes"), (True, "json")):
                suffix = ", send_json" if use_json else ""
                specs.append(({f"zmq.rtt.{kind}.{label}.p50": (f"pyzmq REQ/REP p50{suffix}, {label}", "µs", "p50us", True),
                               f"zmq.rtt.{kind}.{label}.p99": (f"pyzmq REQ/REP p99{suffix}, {label}", "µs", "p99us", True)},
                              lambda use_json=use_json, pin=pin: self.zmq_rtt(use_json, pin)))
            specs.append(({f"pk.rtt.{label}.p50": (f"PeerKit request/reply p50, {label}", "µs", "p50us", True),
                           f"pk.rtt.{label}.p99": (f"PeerKit request/reply p99, {label}", "µs", "p99us", True)},
                          lambda pin=pin: self.peerkit_rtt(pin)))
            specs.append(({f"pk.rtt.own.{label}.p50": (f"PeerKit request/reply p50, own payload coding, {label}", "µs", "p50us", True),
                           f"pk.rtt.own.{label}.p99": (f"PeerKit request/reply p99, own payload coding, {label}", "µs", "p99us", True)},
                          lambda pin=pin: self.peerkit_rtt(pin, own_coding=True)))
            specs.append(({f"pk.rtt.loop.{label}.p50": (f"PeerKit request/reply p50, one event loop, {label}", "µs", "p50us", True),
                           f"pk.rtt.loop.{label}.p99": (f"PeerKit request/reply p99, one event loop, {label}", "µs", "p99us", True)},
                          lambda pin=pin: self.peerkit_rtt(pin, one_loop=True)))
            # The echo with an immediate responder (respondImmediately): answered on the event loop
            # as each request is read, the requester as above; on one event loop; and on one loop
            # with own payload coding, the fastest request/reply PeerKit offers.
            for kind, what, options in (("immediate", "immediate responder", {}),
                                        ("loop.immediate", "immediate responder, one event loop", {"one_loop": True}),
                                        ("loop.immediate.own", "immediate responder, one event loop, own payload coding",
                                         {"one_loop": True, "own_coding": True})):
                specs.append(({f"pk.rtt.{kind}.{label}.p50": (f"PeerKit request/reply p50, {what}, {label}", "µs", "p50us", True),
                               f"pk.rtt.{kind}.{label}.p99": (f"PeerKit request/reply p99, {what}, {label}", "µs", "p99us", True)},
                              lambda pin=pin, options=options: self.peerkit_rtt(pin, immediate=True, **options)))
            self.measure_rounds(f"rtt.{label}", specs, runs)

        self.log("PeerKit resources: 1 GiB between two processes, against a raw C copy of the same bytes, in rounds")
        resource_size = (1 << 30) if not self.args.quick else (64 << 20)
        self.measure_rounds("resource", [
            single("raw.tput.1g", "raw C copy of the resource's bytes (256 KiB frames)", "MB/s",
                   lambda: self.raw_throughput(256 * 1024, resource_size // (256 * 1024), 1, "MBps")),
            ({"pk.resource.1g": ("PeerKit resource, 1 GiB (64 MiB with --quick)", "MB/s", "MBps", False),
              "pk.resource.1g.rss.sender": ("resource: sender's peak RSS growth", "MiB", "senderRSSGrowthMiB", True),
              "pk.resource.1g.rss.receiver": ("resource: receiver's peak RSS growth", "MiB", "receiverRSSGrowthMiB", True)},
             lambda: self.peerkit_resource(resource_size)),
        ], runs)
        for receivers in (1, 4, 16):
            self.measure(f"pk.fanout.{receivers}", f"PeerKit broadcast to {receivers}, per receiver", "msgs/s", runs,
                         lambda receivers=receivers: self.peerkit_throughput(
                             100, n(self.args.peerkit_messages // receivers), 20_000, receivers)["msgsPerSec"])

        self.log("PeerKit security: the same measurements with and without TLS, in rounds")
        securities = ("none", "psk", "cert")
        self.measure_rounds("security.tput.100", [
            single(f"pk.sec.{security}.tput.100", f"PeerKit 100 B one-way, security {security}", "msgs/s",
                   lambda security=security: self.peerkit_throughput(
                       100, n(self.args.peerkit_messages), 20_000, security=security)["msgsPerSec"])
            for security in securities], runs)
        self.measure_rounds("security.tput.64k", [
            single(f"pk.sec.{security}.tput.64k", f"PeerKit 64 KiB one-way, security {security}", "MB/s",
                   lambda security=security: self.peerkit_throughput(65536, n(6_000), 64, security=security)["MBps"])
            for security in securities], runs)
        self.measure_rounds("security.tput.4m", [
            single(f"pk.sec.{security}.tput.4m", f"PeerKit 4 MiB one-way, security {security}", "MB/s",
                   lambda security=security: self.peerkit_throughput(4 << 20, n(100), 4, security=security)["MBps"])
            for security in securities], runs)
        self.measure_rounds("security.rtt", [
            ({f"pk.sec.{security}.rtt.p50": (f"PeerKit request/reply p50, unpinned, security {security}", "µs", "p50us", True),
              f"pk.sec.{security}.rtt.p99": (f"PeerKit request/reply p99, unpinned, security {security}", "µs", "p99us", True),
              f"pk.sec.{security}.connect": (f"PeerKit start() → connected (TCP, TLS if on, hello), security {security}", "ms", "connectMs", True)},
             lambda security=security: self.peerkit_rtt(False, security=security))
            for security in securities], runs)

        self.log("PeerKit resumable sessions: the same measurements with sessions off and on, in rounds")
        # Off and on side by side in every round: sample i of each comes from the same minutes.
        sessions = [("off", False), ("on", True)]
        # A window of 10,000 messages (the sink acknowledging every 5,000): what a broadcast leaves
        # unacknowledged must stay within a session's bound (maximumUnacknowledgedBytes, 8 MiB,
        # counting 256 bytes per frame on top of its bytes), or the library disconnects the sink, as
        # it should. With 20,000, up to 30,000 messages were in flight, and a run whose sink fell
        # behind went over it.
        self.measure_rounds("sessions", [
            single(f"pk.sess.{state}.tput.100", f"PeerKit 100 B one-way, sessions {state}", "msgs/s",
                   lambda on=on: self.peerkit_throughput(100, n(self.args.peerkit_messages), 10_000, sessions=on)["msgsPerSec"])
            for state, on in sessions] + [
            ({f"pk.sess.{state}.rtt.p50": (f"PeerKit request/reply p50, pinned, sessions {state}", "µs", "p50us", True),
              f"pk.sess.{state}.rtt.p99": (f"PeerKit request/reply p99, pinned, sessions {state}", "µs", "p99us", True)},
             lambda on=on: self.peerkit_rtt(True, sessions=on))
            for state, on in sessions], runs)

        self.log("PeerKit discovery (Avahi)")
        trials = max(runs, 5)
        self.measure_samples("pk.discovery.pair", "fresh pair, resume() → connected", "ms",
                             lambda: [self.discovery_pair() * 1000 for _ in range(trials)])
        self.measure_samples("pk.discovery.join", "new transceiver joins an advertised peer", "ms",
                             lambda: [s * 1000 for s in self.discovery_join(trials + 1)["samples"]])

        self.log("PeerKit idle mesh (peerkit node processes on 127.0.0.1, static peers)")
        self.measure_meshes()

        self.log("Listr")
        self.measure_cli()
        self.measure("listr.dump", "listrctl store dump, 64 MiB store", "MB/s", 1,
                     lambda: statistics.median(self.listr_dump(64 if not self.args.quick else 4, 3)))
        if self.figures.get("listr.dump", {}).get("status") == "unavailable":
            # A store that fits in one default-sized frame (16 MiB, base64 included) shows the rate anyway.
            self.measure("listr.dump.8m", "listrctl store dump, 8 MiB store", "MB/s", 1,
                         lambda: statistics.median(self.listr_dump(8, 3)))
        self.measure_listr_store()
        self.measure_samples("listr.watch", f"change seen by the last of {listr_bench.WATCHERS} watchers, after the adder's answer",
                             "ms", lambda: listr_bench.watch_latencies(self, 20 if not self.args.quick else 5))

    LISTR_STORE_TITLES = {
        "listr.store.add.empty": "listrctl item add, empty store (wall, --connect)",
        "listr.store.add.200k": "listrctl item add, 200,000-item store (wall, --connect)",
        "listr.store.replace.200k": "listrctl store replace, 200,000 items (wall)",
        "listr.store.dump.200k": "listrctl store dump, 200,000 items (wall)",
    }

    def measure_listr_store(self):
        keys = self.LISTR_STORE_TITLES
        if self.args.only and not any(key.startswith(p) for key in keys for p in self.args.only):
            return
        try:
            results = listr_bench.store_figures(self, 30 if not self.args.quick else 5)
        except FAILURES as error:
            results = {key: str(error) for key in keys}
        for key, title in keys.items():
            samples = results[key]
            if isinstance(samples, str):
                self.figures[key] = {"title": title, "unit": "ms", "status": "unavailable", "reason": samples}
                self.log(f"  {title}: unavailable: {samples}")
                continue
            figure = {"title": title, "unit": "ms", "status": "ok", "lowerIsBetter": True}
            figure.update(summarize(samples))
            self.figures[key] = figure
            self.log(f"  {title}: {format_figure(figure)}")

    def measure_meshes(self):
        binary = str(self.tools / "peerkit")
        sizes = (8, 32, 64) if not self.args.quick else (8, 16)
        if self.args.only and not any(f"{family}.{count}.".startswith(p) or p.startswith(f"{family}.{count}.")
                                      for family in ("pk.mesh", "raw.mesh", "nio.mesh") for count in sizes for p in self.args.only):
            return
        try:
            lone = mesh.lone_node_rss(binary, self.service_type())
        except FAILURES as error:
            self.log(f"  a lone node's RSS: unavailable: {error}")
            lone = None
        for count in sizes:
            keys = {
                f"pk.mesh.{count}.time": (f"{count} nodes: start → full mesh", "s", "meshSeconds", True),
                f"pk.mesh.{count}.cpu": (f"{count} nodes idle: CPU of all together", "% of a core", "idleCPUPercent", True),
                f"pk.mesh.{count}.segments": (f"{count} nodes idle: TCP segments per connection", "segments/s", "segmentsPerConnectionPerSecond", True),
                f"pk.mesh.{count}.loss": (f"{count} nodes: a frozen node noticed by all (heartbeat)", "s", "lossDetectionSeconds", True),
                f"pk.mesh.{count}.exchange": (f"{count} nodes idle: CPU per heartbeat exchange (both ends)", "µs",
                                              "cpuPerExchangeMicroseconds", True),
            }
            if lone is not None:
                keys[f"pk.mesh.{count}.rss"] = (f"{count} nodes: RSS per connection (both ends)", "KiB", "rssPerConnectionKiB", True)
            # The floors first, just before PeerKit's mesh: the same mesh in raw C and in bare SwiftNIO
            # (with --only, chosen as any figure is: `--only raw.mesh nio.mesh pk.mesh` for all three).
            for key, what, command in ((f"raw.mesh.{count}.exchange", "raw C mesh", [self.raw, "mesh"]),
                                       (f"nio.mesh.{count}.exchange", "bare SwiftNIO mesh", [self.pkbench, "nio-mesh"])):
                self.measure_many({key: (f"{what}, {count} nodes idle: CPU per heartbeat exchange (both ends)",
                                         "µs", "cpuPerExchangeMicroseconds", True)},
                                  1, lambda count=count, command=command: mesh.measure_floor_mesh(command, count))
            self.measure_many(keys, 1, lambda count=count: mesh.measure_mesh(binary, self.service_type(), count, lone_rss=lone))

    def measure_samples(self, key, title, unit, samples):
        """Records a figure whose samples come from one call of `samples` (a list), e.g. several
        timings inside one process; `lowerIsBetter` since these are all times."""
        if self.args.only and not any(key.startswith(prefix) for prefix in self.args.only):
            return
        try:
            values = samples()
        except FAILURES as error:
            self.figures[key] = {"title": title, "unit": unit, "status": "unavailable", "reason": str(error)}
            self.log(f"  {title}: unavailable: {error}")
            return
        figure = {"title": title, "unit": unit, "status": "ok", "lowerIsBetter": True}
        figure.update(summarize(values))
        self.figures[key] = figure
        self.log(f"  {title}: {format_figure(figure)}")

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


def single(key, title, unit, one_run, lower_is_better=False):
    """A spec of `Suite.measure_rounds` for a run that yields one figure."""
    return {key: (title, unit, None, lower_is_better)}, one_run


def security_option(security):
    """peerkit-bench's --security option; none is its default and left out, so that the plaintext
    figures can be measured with a peerkit-bench from before the option (round 1, for a bisection)."""
    return [] if security == "none" else ["--security", security]


def sessions_option(sessions):
    """peerkit-bench's --sessions flag (resumable sessions on); left out when off, as --security none is."""
    return ["--sessions"] if sessions else []


def own_coding_option(own_coding):
    """peerkit-bench's --own-coding flag (a payload type that writes and reads its own JSON); left out when off."""
    return ["--own-coding"] if own_coding else []


def one_line(completed):
    """What a finished listrctl said (stderr, else stdout), on one line, for an error message."""
    text = " ".join((completed.stderr or completed.stdout or f"exit status {completed.returncode}").split())
    return text if len(text) <= 300 else text[:300] + "…"


def free_port():
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
