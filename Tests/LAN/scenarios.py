#!/usr/bin/env python3
"""PeerKit's multi-host scenarios on the simulated LAN (scripts/lan).

Run by scripts/lan-test (make test-lan); see Documentation/Testing.md.

    python3 -B Tests/LAN/scenarios.py --bin .build/debug [--only 1,2b,6]

Each scenario starts its own processes with its own random service type, prints its measured figures, and stops
everything it started. The LAN itself (up/down) belongs to scripts/lan-test. Exit status 1 if any scenario failed.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

sys.dont_write_bytecode = True

from harness import DETECTION_BOUND, EVENTUALLY, RECONNECT_BOUND, Harness, within  # noqa: E402
from lan import Lan, ScenarioFailure, random_service_type, wait_until  # noqa: E402
from listr import Listr  # noqa: E402
from ipv6 import IPv6Scenarios  # noqa: E402

# Scenario 13 (issue 32): A streams this many messages over this long, and B's link is down this long in the middle.
STREAM_COUNT = 3000
STREAM_SECONDS = 6.0
CUT_SECONDS = 5.0
# The peers are back within this long of the link returning: issue 32's 2 s. A suspended peer is redialled every 0.5 s
# (ConnectionManager.suspendedPeerRedialInterval), and a dial into a dead link ends within its 1 s connect timeout, so
# the next dial after the link returns goes out within about 1.5 s.
RESUME_BOUND = 2.0
# A killed peer's session ends within this long: its first redial, 0.5 s after the loss (plus jitter), is refused at
# every address (nothing listens there any more). Well under the 30 s resume window it waited out before.
EXIT_BOUND = 3.0


class Scenarios(IPv6Scenarios):
    """The scenarios of issue 5 (plus 0, the LAN itself, and 2b and 7) on an IPv4-only LAN, and those of issue 31
    (8 to 12, in ipv6.py) on a LAN with IPv6 on; each returns its figures as one line."""

    def scenario_0(self) -> str:
        """The LAN itself: a record published on h1 reaches h2 and h3 over the bridge, never the root namespace."""
        service_type = random_service_type()
        instance = f"lan-check-{service_type}"
        start = time.monotonic()
        self.publish(self.a, instance, service_type, 4242)
        expected = (instance, self.lan.address(self.a), 4242)
        for host in (self.b, self.c):
            wait_until(lambda: expected in (self.lan.browse(host, service_type) or []), EVENTUALLY,
                       f"avahi-browse on {host} seeing {instance} at {expected[1]}:4242")
        seen_after = time.monotonic() - start
        leaks = self.lan.root_links_into_lan()
        if leaks:
            raise ScenarioFailure("the root namespace has links into the LAN:\n" + "\n".join(leaks))
        root = subprocess.run(["avahi-browse", "--resolve", "--parsable", "--terminate", f"_{service_type}._tcp"],
                              capture_output=True, text=True, timeout=30)
        if root.returncode != 0:
            root_note = "the root namespace has no avahi-daemon to ask"
        elif instance in root.stdout:
            raise ScenarioFailure(f"the root namespace's avahi-daemon sees {instance}: the LAN leaks.\n{root.stdout}")
        else:
            root_note = "the root namespace's avahi-daemon does not see it"
        return (f"h1's record resolved on h2 and h3 in {seen_after:.2f} s; no root-namespace link into the LAN; "
                f"{root_note}")

    def scenario_1(self) -> str:
        """Three hosts find and connect to each other through real mDNS; a broadcast on A reaches B and C."""
        service_type = random_service_type()
        (a, b, c), seconds = self.mesh(service_type, [("A", self.a), ("B", self.b), ("C", self.c)])
        delivery = self.deliver(a, [b, c], "hello from A")
        return (f"three hosts fully connected in {seconds:.2f} s; "
                f"A's broadcast reached B and C in {delivery * 1000:.0f} ms")

    def _cut(self, cut, restore, how: str) -> str:
        service_type = random_service_type()
        (a, b, c), _ = self.mesh(service_type, [("A", self.a), ("B", self.b), ("C", self.c)])
        others = (b, c)
        marks = {node: node.mark() for node in (a, b, c)}
        cut_at = time.monotonic()
        cut(self.a)
        lost = [node.wait_lost(a.peer_id, 15, "reporting A lost", marks[node]).at - cut_at for node in others]
        lost_on_a = [a.wait_lost(node.peer_id, 15, f"reporting {node.name} lost", marks[a]).at - cut_at for node in others]
        within(max(lost), DETECTION_BOUND, "B and C reporting A disconnected")
        within(max(lost_on_a), DETECTION_BOUND, "A reporting B and C disconnected")
        cpu = self.idle_cpu([a, b, c])

        marks = {node: node.mark() for node in (a, b, c)}
        restored_at = time.monotonic()
        restore(self.a)
        back = [node.wait_back(lambda p: p.get("id") == a.peer_id, 30, "reconnecting to A", marks[node]).at
                - restored_at for node in others]
        back_on_a = [a.wait_back(lambda p, n=node: p.get("id") == n.peer_id, 30, f"reconnecting to {node.name}",
                                 marks[a]).at - restored_at for node in others]
        within(max(back + back_on_a), RECONNECT_BOUND, "reconnecting after the link came back")
        delivery = self.deliver(a, [b, c], f"A is back ({how})")
        return (f"{how}: B and C reported A gone after {max(lost):.2f} s "
                f"(A reported them after {max(lost_on_a):.2f} s); "
                f"CPU while cut: {cpu}; reconnected {max(back + back_on_a):.2f} s after the link returned; "
                f"A's broadcast then reached B and C in {delivery * 1000:.0f} ms")

    def scenario_2(self) -> str:
        """Link cut: A's cable is pulled (carrier lost) and plugged back in."""
        return self._cut(self.lan.link_down, self.lan.link_up, "cable pulled")

    def scenario_2b(self) -> str:
        """Silent partition: the switch drops A's frames, no carrier change, so no mDNS event helps reconnecting."""
        return self._cut(self.lan.partition, self.lan.heal, "silent partition")

    def scenario_13(self) -> str:
        """Resumable sessions: B's link goes down for 5 s in the middle of A's stream of 3,000 messages."""
        service_type = random_service_type()
        (a, b), _ = self.mesh(service_type, [("A", self.a), ("B", self.b)])
        mark, a_mark = b.mark(), a.mark()
        prefix = "r"

        def received() -> list:
            return [e for e in b.events_since(mark) if e.get("event") == "message" and (e.get("from") or {}).get("id") == a.peer_id
                    and str(e.get("text", "")).startswith(prefix)]

        a.send(f"stream {STREAM_COUNT} {STREAM_SECONDS} {prefix}")
        # The cut comes once B has a third of the stream, as in the measurement (from the 2nd second of 6).
        wait_until(lambda: len(received()) >= STREAM_COUNT // 3, EVENTUALLY, "B receiving the first third of A's stream")
        before_cut = len(received())
        cut_at = time.monotonic()
        self.lan.link_down(self.b)
        self.restores.append(lambda: self.lan.link_up(self.b))
        # The gap itself is the stimulus: longer than the peer timeout (2.5 s), shorter than the resume window (30 s).
        suspended = [node.wait(lambda e, o=other: e.get("event") == "peerSuspended" and (e.get("peer") or {}).get("id") == o.peer_id,
                               15, f"reporting {other.name} suspended", since).at - cut_at
                     for node, other, since in ((b, a, mark), (a, b, a_mark))]
        time.sleep(max(0.0, CUT_SECONDS - (time.monotonic() - cut_at)))
        up_at = time.monotonic()
        self.lan.link_up(self.b)
        try:
            wait_until(lambda: len(received()) >= STREAM_COUNT, EVENTUALLY, f"B receiving all {STREAM_COUNT} messages of A's stream")
        except ScenarioFailure as failure:
            raise ScenarioFailure(f"{failure} It has {len(received())} ({before_cut} before the cut).\n{b.story()}") from None
        a.wait(lambda e: e.get("event") == "streamed", EVENTUALLY, "A's stream ending", a_mark)
        messages = received()
        numbers = [int(str(e["text"])[len(prefix):]) for e in messages]
        if numbers != list(range(1, STREAM_COUNT + 1)):
            missing = sorted(set(range(1, STREAM_COUNT + 1)) - set(numbers))
            duplicates = len(numbers) - len(set(numbers))
            out_of_order = sum(1 for x, y in zip(numbers, numbers[1:]) if y <= x)
            raise ScenarioFailure(f"B got {len(numbers)} messages of {STREAM_COUNT}: {len(missing)} missing (first "
                                  f"{missing[:5]}), {duplicates} duplicated, {out_of_order} out of order.\n{b.story()}")
        # Back: the first message B handled after the link returned (what A sent during the gap, resent on resume).
        back = min(e.at for e in messages if e.at >= up_at) - up_at
        within(back, RESUME_BOUND, "B receiving A's stream again after the link returned")
        for node, other, since in ((b, a, mark), (a, b, a_mark)):
            if node.count("peerDisconnected", since, other.peer_id):
                raise ScenarioFailure(f"{node.label} reported {other.label} disconnected during a {CUT_SECONDS:.0f} s gap: "
                                      f"the session must have kept it (suspended).\n{node.story()}")
        return (f"{STREAM_COUNT} messages over {STREAM_SECONDS:.0f} s, B's link down for {CUT_SECONDS:.0f} s after "
                f"{before_cut}: every one delivered once, in order; B and A reported each other suspended after "
                f"{suspended[0]:.2f} s and {suspended[1]:.2f} s, never disconnected; the stream went on {back:.2f} s "
                f"after the link returned")

    def scenario_3(self) -> str:
        """Peer crash: SIGKILL A's node; B and C report it, end its session at their refused redial; A is back after a restart."""
        service_type = random_service_type()
        (a, b, c), _ = self.mesh(service_type, [("A", self.a), ("B", self.b), ("C", self.c)])
        # The claim is about a peer whose address B and C know. A that dialled them is connected before
        # their avahi-daemons resolve its advertisement (avahi probes a new service for about 0.75 s):
        # killed then, it has no address to redial, and its session waits out its resume window.
        for node in (b, c):
            wait_until(lambda node=node: node.knows_advertisement(a.peer_id), EVENTUALLY,
                       f"{node.label} resolving A's advertisement")
        marks = {node: node.mark() for node in (b, c)}
        killed_at = time.monotonic()
        a.kill()
        lost = [node.wait_lost(a.peer_id, 15, "reporting the killed A", marks[node]).at - killed_at
                for node in (b, c)]
        within(max(lost), DETECTION_BOUND, "B and C reporting the killed A")
        # Lost without a bye, A is suspended first; the first redial finds nothing listening at any of its addresses,
        # so its session ends then (peerExited), not at the end of the 30 s resume window.
        gone = [node.wait(lambda e: e.get("event") == "peerDisconnected" and (e.get("peer") or {}).get("id") == a.peer_id,
                          15, "reporting the killed A disconnected", marks[node]) for node in (b, c)]
        for node, event in zip((b, c), gone):
            if "is gone: its connection closed without a goodbye" not in (event.get("reason") or ""):
                raise ScenarioFailure(f"{node.label} reported the killed A disconnected for another reason than its "
                                      f"refused redial: {event.get('reason')!r}.\n{node.story()}")
        ended = max(event.at for event in gone) - killed_at
        within(ended, EXIT_BOUND, "B and C ending the killed A's session")
        cpu = self.idle_cpu([b, c])

        marks = {node: node.mark() for node in (b, c)}
        restarted_at = time.monotonic()
        a2 = self.node(self.a, service_type, "A")
        a2.wait_started()
        back = [node.wait_connected(lambda p: p.get("id") == a2.peer_id, EVENTUALLY, "connecting to the restarted A",
                                    marks[node]).at - restarted_at for node in (b, c)]
        for node in (b, c):
            a2.wait_connected(lambda p, n=node: p.get("id") == n.peer_id, EVENTUALLY, f"connecting to {node.name}")
        delivery = self.deliver(a2, [b, c], "A restarted")
        return (f"B and C reported the killed A after {max(lost):.2f} s and disconnected it (nothing listening at its "
                f"addresses) after {ended:.2f} s; CPU meanwhile: {cpu}; "
                f"the restarted A was connected to both {max(back):.2f} s after its launch; "
                f"its broadcast reached them in {delivery * 1000:.0f} ms")

    def scenario_4(self) -> str:
        """avahi-daemon restart on B: B re-advertises and re-browses by itself; connections carry messages."""
        service_type = random_service_type()
        (a, b, c), _ = self.mesh(service_type, [("A", self.a), ("B", self.b), ("C", self.c)])
        marks = {node: node.mark() for node in (a, b, c)}
        self.lan.avahi_stop(self.b)
        wait_until(lambda: "B" not in self.lan.instance_names(self.a, service_type), EVENTUALLY,
                   "A's avahi-daemon forgetting B after B's avahi-daemon stopped")
        during = max(self.deliver(a, [b, c], "while B's avahi is down"),
                     self.deliver(b, [a, c], "B speaking while its avahi is down"))

        restarted_at = time.monotonic()
        self.lan.avahi_start(self.b)
        # A fresh node on A that does not advertise can only learn of B through B's new advertisement.
        probe = self.node(self.a, service_type, "probe-A", "--no-advertise")
        probe.wait_started()
        readvertised = probe.wait_connected(lambda p: p.get("id") == b.peer_id, EVENTUALLY,
                                            "finding B through B's re-advertisement").at - restarted_at
        # A record published on C after the restart: B can only learn of it by browsing again on its new daemon.
        ghost_id = f"ghost-{service_type}"
        published_at = time.monotonic()
        self.publish(self.c, "ghost", service_type, 9, f"peerid={ghost_id}")
        rebrowsed = b.wait(lambda e: e.get("event") == "peerAdded" and (e.get("peer") or {}).get("id") == ghost_id,
                           EVENTUALLY, "B discovering a service published after its avahi-daemon restarted",
                           marks[b]).at - published_at
        wait_until(lambda: any(entry[0] == "B" for entry in self.lan.browse(self.c, service_type) or []), EVENTUALLY,
                   "C's avahi-daemon resolving B again")
        after = self.deliver(c, [a, b], "after B's avahi restarted")
        for node in (a, b, c):
            drops = node.count_lost(marks[node])
            if drops:
                raise ScenarioFailure(f"{node.label} lost {drops} connection(s) while B's avahi-daemon restarted; "
                                      f"existing connections must carry on.\n{node.story()}")
        return (f"messages flowed while B's avahi was down (slowest delivery {during * 1000:.0f} ms) and after it "
                f"({after * 1000:.0f} ms); a new node on A found B {readvertised:.2f} s after B's avahi-daemon "
                f"restarted; "
                f"B discovered a newly published service in {rebrowsed:.2f} s; no connection dropped")

    def scenario_5(self) -> str:
        """Listr across hosts: listrd on A, listrctl on B; with listrd on A and C, --peer picks one."""
        return Listr(self).run()

    def scenario_6(self) -> str:
        """Name collision: two hosts advertise the same peer name; both stay reachable under distinct instance names."""
        service_type = random_service_type()

        def twins_on_c():
            names = {name for name, _, _ in self.lan.browse(self.c, service_type) or [] if name.startswith("twin")}
            return sorted(names) if len(names) == 2 else None

        try:
            (twin1, twin2, observer), seconds = self.mesh(service_type, [("twin", self.a), ("twin", self.b),
                                                                          ("observer", self.c)])
        except ScenarioFailure as failure:
            seen = self.lan.browse(self.c, service_type)
            raise ScenarioFailure(f"{failure}\nC's avahi-daemon sees: {seen}") from None
        names = wait_until(twins_on_c, EVENTUALLY, "two distinct 'twin' instances on C's avahi-daemon")
        to_twins = self.deliver(observer, [twin1, twin2], "to both twins")
        self.deliver(twin1, [observer], "from twin on A")
        self.deliver(twin2, [observer], "from twin on B")
        return (f"both 'twin' peers connected in {seconds:.2f} s, advertised as {names}; messages flow both ways "
                f"(observer to both twins in {to_twins * 1000:.0f} ms)")

    def scenario_7(self) -> str:
        """A peer that cannot be reached: redials back off with jitter up to a cap, and the node stays idle."""
        service_type = random_service_type()
        # A stale record of a peer whose port accepts and drops every connection at once: each dial fails fast,
        # which is where a redial loop without back-off would spin. The server logs every attempt.
        server = subprocess.Popen(self.lan.command(self.a, sys.executable, "-c", ACCEPT_AND_DROP),
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.processes.append(server)
        port_line = server.stdout.readline()
        if not port_line.strip().isdigit():
            raise ScenarioFailure(f"the accept-and-drop server on {self.a} did not report its port: {port_line!r}")
        attempts = []
        threading.Thread(target=lambda: [attempts.append(time.monotonic()) for _ in server.stdout], daemon=True).start()
        self.publish(self.a, "unreachable", service_type, int(port_line), f"peerid=unreachable-{service_type}")
        # The default back-off (0.5 s doubling to 30 s) needs minutes to reach its cap; the node is told to
        # cap at 2 s so that ten dials show the growth, the cap and the jitter within a minute.
        node = self.node(self.b, service_type, "B", "--reconnect-initial", "0.5", "--reconnect-maximum", "2")
        node.wait_started()
        wait_until(lambda: len(attempts) >= 3, EVENTUALLY, "B dialling the unreachable peer")
        cpu = self.idle_cpu([node])
        wait_until(lambda: len(attempts) >= 10, EVENTUALLY, "B's tenth dial of the unreachable peer")
        times = list(attempts[:10])
        intervals = [later - earlier for earlier, later in zip(times, times[1:])]
        shown = ", ".join(f"{interval:.2f}" for interval in intervals)
        if intervals[0] >= max(intervals[-4:]):
            raise ScenarioFailure(f"the redial intervals do not grow (no back-off): {shown} s")
        if max(intervals) > RECONNECT_BOUND:
            raise ScenarioFailure(f"a redial interval exceeds {RECONNECT_BOUND:.0f} s (the cap must keep "
                                  f"reconnection within the bound): {shown} s")
        capped = intervals[-4:]
        if max(capped) - min(capped) < 0.02:
            raise ScenarioFailure(f"the capped redial intervals are all alike (no jitter): {shown} s")
        return f"redial intervals {shown} s (back-off, capped, jittered); CPU meanwhile: {cpu}"


# Accepts TCP connections and closes each at once, printing its port first and then a line per connection.
ACCEPT_AND_DROP = """
import socket
server = socket.socket()
server.bind(("0.0.0.0", 0))
server.listen(64)
print(server.getsockname()[1], flush=True)
while True:
    connection, _ = server.accept()
    connection.close()
    print("accepted", flush=True)
"""

# Scenario 13 is issue 32's: resumable sessions across a link that drops.
SCENARIOS = ["0", "1", "2", "2b", "3", "4", "5", "6", "7", "13"]
# Run on a LAN brought up with --ipv6 (scripts/lan-test brings one up after the IPv4-only one).
IPV6_SCENARIOS = ["8", "9", "10", "11", "12", "14"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, type=Path, help="the Swift bin directory (swift build --show-bin-path)")
    parser.add_argument("--only", default=",".join(SCENARIOS + IPV6_SCENARIOS), help="comma-separated scenarios to run")
    parser.add_argument("--needs", choices=["ipv4", "ipv6"],
                        help="only say (exit status 0) whether the selection has scenarios for this kind of LAN")
    arguments = parser.parse_args()
    selected = arguments.only.split(",")
    known = SCENARIOS + IPV6_SCENARIOS
    unknown = [name for name in selected if name not in known]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; choose from {known}")
    if arguments.needs:
        kind = IPV6_SCENARIOS if arguments.needs == "ipv6" else SCENARIOS
        return 0 if any(name in kind for name in selected) else 1
    arguments.bin = arguments.bin.resolve()
    node_binary = arguments.bin / "peerkit"
    if not os.access(node_binary, os.X_OK):
        print(f"scenarios: {node_binary} is missing; build first with `swift build`.", file=sys.stderr)
        return 1

    # SIGTERM (e.g. from scripts/lan-test's trap) unwinds like Ctrl-C, so every node is stopped by its PID.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    lan = Lan()
    # The scenarios of the other kind of LAN run in scripts/lan-test's other pass.
    selected = [name for name in selected if (name in IPV6_SCENARIOS) == lan.ipv6()]
    log_dir = Path(tempfile.mkdtemp(prefix="peerkit-lan-logs-"))
    scenarios = Scenarios(lan, arguments.bin, log_dir)
    failed = []
    try:
        for name in selected:
            method = getattr(scenarios, f"scenario_{name}")
            print(f"scenario {name}: {method.__doc__.splitlines()[0]}", flush=True)
            started = time.monotonic()
            try:
                figure = method()
                print(f"scenario {name}: PASS ({time.monotonic() - started:.1f} s): {figure}", flush=True)
            except ScenarioFailure as failure:
                failed.append(name)
                print(f"scenario {name}: FAIL: {failure}", flush=True)
            except Exception:  # a bug in the runner itself still must not hide the other scenarios' results
                failed.append(name)
                print(f"scenario {name}: FAIL with an error in the runner:\n{traceback.format_exc()}", flush=True)
            finally:
                scenarios.cleanup()
    except (KeyboardInterrupt, SystemExit):
        print("LAN scenarios: interrupted; stopping every process started", flush=True)
        raise
    finally:
        scenarios.cleanup()
        if os.environ.get("LAN_KEEP_LOGS"):
            print(f"LAN scenarios: the nodes' logs are kept in {log_dir}", flush=True)
        else:
            shutil.rmtree(log_dir, ignore_errors=True)
    passed = len(selected) - len(failed)
    print(f"LAN scenarios: {passed} passed, {len(failed)} failed" + (f" ({', '.join(failed)})" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
