"""The scenarios of issue 31: a LAN with IPv6 on as Debian ships it (scripts/lan up N --ipv6).

Dual-stack hosts, an IPv6-only host, a second interface with the same private address on every host, an address
that changes while connected, and an interface that goes down and up; and (scenario 14) a peer that crashes there. For each: every pair is connected exactly
once within 5 s (after a change: within 3 s of avahi-daemon's announcement), messages flow both ways (each
broadcast within 1 s), and no misleading notice is logged (the nodes run with --verbose so that their notices can
be read).
"""

import re
import subprocess
import time
from pathlib import Path

from harness import SLACK, Harness, within
from lan import ScenarioFailure, random_service_type, wait_until
from node import BACK

# Every pair connected within this long of the nodes' launch (the issue's bound).
MESH_BOUND = 5.0
# After an address change or an interface coming back: connected again within this long of avahi's announcement.
ANNOUNCEMENT_BOUND = 3.0
# A broadcast on a connected mesh arrives within milliseconds; within this long even on a busy 2-core machine. A
# message held until a connection the peer lost had closed took 5 s (the handshake timeout) in 4 of 10 runs of
# scenario 11 before session frames stopped waiting for it.
DELIVERY_BOUND = 1.0
# A killed peer's session ends within this long: the first redial of its suspended session, 0.5 s after the loss (plus
# jitter), finds every address refusing (scenario 14; scenario 3 holds the IPv4-only LAN to the same bound).
EXIT_BOUND = 3.0
# 172.31.0.1/24 is on every host's ext1 (scripts/lan): an address that leads each host back to itself.
SHARED_ADDRESS = "172.31.0.1"
# A log line of swift-log's StreamLogHandler: "2026-11-26T20:30:48+0000 notice peerkit: ..." (level second).
# avahi-daemon's log line naming its host name, at start-up and after a conflict made it choose another one.
HOST_NAME = re.compile(r"Host name is (\S+)\.(?: |$)")
LOG_LEVEL = re.compile(r"^\S+ (notice|warning|error|critical) ")


class IPv6Scenarios(Harness):
    """Scenarios 8 to 12; they need a LAN brought up with --ipv6."""

    # MARK: Helpers

    def v6_node(self, host: str, service_type: str, name: str, *extra: str):
        return self.node(host, service_type, name, "--verbose", *extra)

    def v6_mesh(self, service_type: str, names_and_hosts, *extra: str):
        """Like Harness.mesh, with --verbose nodes; returns the nodes and the seconds until all were connected."""
        start = time.monotonic()
        nodes = [self.v6_node(host, service_type, name, *extra) for name, host in names_and_hosts]
        for node in nodes:
            node.wait_started()
        ids = {node.peer_id for node in nodes}

        def fully_connected():
            arrivals = []
            for node in nodes:
                connected = node.connected_ids()
                if node.peer_id in connected:
                    raise ScenarioFailure(f"{node.label} reports a connection to itself.\n{node.story()}")
                if not (ids - {node.peer_id}) <= connected.keys():
                    return None
                arrivals += [connected[other] for other in ids - {node.peer_id}]
            return max(arrivals)

        try:
            connected_at = wait_until(fully_connected, 60, "every node connected to every other")
        except ScenarioFailure as failure:
            raise ScenarioFailure(f"{failure}\n{self.stories()}") from None
        return nodes, connected_at - start

    @staticmethod
    def notices(node, since_line: int = 0) -> list:
        """The node's log lines at notice level or above (after the first `since_line` lines of its stderr)."""
        try:
            lines = node.stderr_path.read_text(errors="replace").splitlines()[since_line:]
        except OSError:
            return []
        # The warning that plaintext is in use is true and expected (the nodes run without security).
        return [line for line in lines if LOG_LEVEL.match(line) and "neither authenticated nor encrypted" not in line]

    @staticmethod
    def stderr_lines(node) -> int:
        try:
            return len(node.stderr_path.read_text(errors="replace").splitlines())
        except OSError:
            return 0

    def no_notices(self, nodes, since=None, justified=()) -> None:
        """Fails when any node logged a notice (or worse), or reported an error event, since `since`;
        notices containing one of the `justified` fragments (or all the fragments of a tuple among them)
        are what the scenario makes happen."""
        def is_justified(line: str) -> bool:
            return any(all(part in line for part in ((fragment,) if isinstance(fragment, str) else fragment))
                       for fragment in justified)

        for node in nodes:
            lines = [line for line in self.notices(node, (since or {}).get(node, (0, 0))[0]) if not is_justified(line)]
            errors = [dict(e) for e in node.events[(since or {}).get(node, (0, 0))[1]:] if e.get("event") == "error"]
            if lines or errors:
                shown = "\n".join(f"  {line}" for line in lines[:10] + [str(e) for e in errors[:5]])
                raise ScenarioFailure(f"{node.label} logged what nothing justified:\n{shown}\n{node.story()}")

    def cursors(self, nodes) -> dict:
        """Per node: (stderr line count, event count) now, for no_notices(since=...)."""
        return {node: (self.stderr_lines(node), node.mark()) for node in nodes}

    def exactly_once(self, nodes, since: dict = None) -> None:
        """Every node saw every other peer added once and connected once (since its cursor), never itself."""
        for node in nodes:
            mark = (since or {}).get(node, 0)
            for other in nodes:
                if other is node:
                    continue
                added = node.count("peerAdded", mark, other.peer_id)
                connected = node.count("peerConnected", mark, other.peer_id)
                if added > 1 or connected != 1:
                    raise ScenarioFailure(f"{node.label} saw {other.label} added {added} and connected {connected} "
                                          f"times; once each is right.\n{node.story()}")

    def both_ways(self, nodes, what: str) -> float:
        """Each node broadcasts once; returns the slowest delivery in seconds, which must be within DELIVERY_BOUND."""
        try:
            slowest = max(self.deliver(sender, [n for n in nodes if n is not sender], f"{what} from {sender.name}")
                          for sender in nodes)
        except ScenarioFailure as failure:
            raise ScenarioFailure(f"{str(failure).splitlines()[0]}\n{self.stories()}") from None
        if slowest > DELIVERY_BOUND:
            raise ScenarioFailure(f"a broadcast took {slowest:.2f} s to arrive on a connected mesh (bound "
                                  f"{DELIVERY_BOUND:.0f} s)\n{self.stories()}")
        return slowest

    def ip(self, host: str, *arguments: str) -> None:
        result = self.lan.run(host, "ip", *arguments)
        if result.returncode != 0:
            raise ScenarioFailure(f"`ip {' '.join(arguments)}` on {host} failed: {result.stderr.strip()}")

    def link_local(self, host: str, interface: str = "veth0") -> str:
        """The host's current fe80:: address on `interface` (waits for one that passed duplicate detection)."""
        def current():
            out = self.lan.run(host, "ip", "-6", "-o", "addr", "show", "dev", interface, "scope", "link").stdout
            for line in out.splitlines():
                if "tentative" not in line:
                    match = re.search(r"inet6 (fe80::[0-9a-f:]+)/64", line)
                    if match:
                        return match.group(1)
            return None
        return wait_until(current, 30, f"{host}'s link-local address on {interface}")

    def avahi_log_mark(self, host: str) -> int:
        return len(self.avahi_log(host))

    def avahi_log(self, host: str) -> list:
        return (Path(self.lan.state_dir()) / host / "avahi.log").read_text(errors="replace").splitlines()

    def host_name(self, host: str) -> str:
        """The host name `host`'s avahi-daemon uses now: h1.local, unless a conflict made it pick another (h1-2.local)."""
        names = [m.group(1) for line in self.avahi_log(host) for m in [HOST_NAME.search(line)] if m]
        return names[-1] if names else f"{host}.local"

    def resolves_to(self, observer: str, host: str, address: str) -> bool:
        """Whether `observer`'s avahi-daemon resolves `host`'s host name to `address` now (IPv4)."""
        try:
            result = self.lan.run(observer, "avahi-resolve-host-name", "-4", self.host_name(host), timeout=10)
        except subprocess.TimeoutExpired:
            return False
        return result.returncode == 0 and result.stdout.split()[1:2] == [address]

    # MARK: Scenarios

    def scenario_8(self) -> str:
        """Dual-stack hosts (IPv4 and link-local IPv6, avahi with use-ipv6=yes): one connection per pair."""
        service_type = random_service_type()
        nodes, seconds = self.v6_mesh(service_type, [("A", self.a), ("B", self.b), ("C", self.c)])
        within(seconds, MESH_BOUND, "connecting every pair of dual-stack hosts")
        delivery = self.both_ways(nodes, "dual-stack")
        self.exactly_once(nodes)
        self.no_notices(nodes)
        # The TXT record's pairs reach every peer, however it was met first (issue 31: sec=none was missing).
        for node in nodes:
            def knows_txt(e):
                peers = e.get("peers") or []
                return (e.get("event") == "availablePeersChanged" and len(peers) == len(nodes) - 1
                        and all((p.get("info") or {}).get("sec") == "none" for p in peers))
            node.wait(knows_txt, 30, "every peer showing its TXT record's sec=none")
        return (f"three dual-stack hosts fully connected in {seconds:.2f} s, each pair once; slowest broadcast "
                f"{delivery * 1000:.0f} ms; every peer's TXT pairs known; no notice logged")

    def scenario_9(self) -> str:
        """An IPv6-only host (link-local addresses only) among dual-stack hosts."""
        self.ip(self.c, "-4", "addr", "flush", "dev", "veth0")
        self.restores.append(lambda: self.ip(self.c, "addr", "add", f"{self.lan.address(self.c)}/24", "dev", "veth0"))
        service_type = random_service_type()
        nodes, seconds = self.v6_mesh(service_type, [("A", self.a), ("B", self.b), ("C", self.c)])
        within(seconds, MESH_BOUND, "connecting the IPv6-only host")
        delivery = self.both_ways(nodes, "IPv6-only")
        self.exactly_once(nodes)
        self.no_notices(nodes)
        return (f"C (link-local IPv6 only) and the dual-stack A and B fully connected in {seconds:.2f} s, each pair "
                f"once; slowest broadcast {delivery * 1000:.0f} ms; no notice logged")

    def scenario_10(self) -> str:
        """A second interface with the same private address on every host; a service advertised there is not us."""
        for host in (self.a, self.b, self.c):
            self.ip(host, "link", "set", "ext1", "up")
            self.restores.append(lambda h=host: self.ip(h, "link", "set", "ext1", "down"))
        for host in (self.a, self.b, self.c):
            self.link_local(host, "ext1")
        service_type = random_service_type()
        # One port for all, so that SHARED_ADDRESS:port leads each host to its own node.
        port = "7431"
        nodes, seconds = self.v6_mesh(service_type, [("A", self.a), ("B", self.b), ("C", self.c)], "--port", port)
        within(seconds, MESH_BOUND, "connecting hosts with two interfaces")
        since = self.cursors(nodes)
        # A service whose only address is the one every host has: dialling it would lead each node to itself.
        self.processes.append(subprocess.Popen(
            self.lan.command(self.b, "avahi-publish", "--address", "--no-reverse", "shared.local", SHARED_ADDRESS),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        ghost = f"ghost-{service_type}"
        self.processes.append(subprocess.Popen(
            self.lan.command(self.b, "avahi-publish", "--service", "--host=shared.local", "ghost", f"_{service_type}._tcp",
                             port, f"peerid={ghost}", "proto=1", "sec=none"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for node in nodes:
            node.wait(lambda e: e.get("event") == "peerAdded" and (e.get("peer") or {}).get("id") == ghost, 60,
                      "discovering the service at the shared address", since[node][1])
        # Time for a dial that would lead back (it connects within a millisecond) and its notices.
        wait_until(lambda: all(any(SHARED_ADDRESS in line and "leads back" in line
                                   for line in node.stderr_path.read_text(errors="replace").splitlines())
                               for node in nodes), 30, "each node recognising the shared address as its own")
        delivery = self.both_ways(nodes, "two interfaces")
        self.exactly_once(nodes)
        for node in nodes:
            if node.count("peerConnected", 0, ghost):
                raise ScenarioFailure(f"{node.label} connected to the ghost at {SHARED_ADDRESS}\n{node.story()}")
        self.no_notices(nodes)
        return (f"hosts with ext1 ({SHARED_ADDRESS} on each) fully connected in {seconds:.2f} s, each pair once; "
                f"a service at {SHARED_ADDRESS}:{port} was recognised as each node itself and not dialled; slowest "
                f"broadcast {delivery * 1000:.0f} ms; no notice logged")

    def scenario_11(self) -> str:
        """A host's addresses change while connected (IPv4 renumbered, new link-local IPv6 address)."""
        service_type = random_service_type()
        nodes, seconds = self.v6_mesh(service_type, [("A", self.a), ("B", self.b), ("C", self.c)])
        a, b, c = nodes
        old_v4 = self.lan.address(self.a)
        new_v4 = "10.77.0.201"
        old_v6 = self.link_local(self.a)
        new_v6 = "fe80::a:201"
        marks = {node: node.mark() for node in nodes}
        since = self.cursors(nodes)
        log_mark = self.avahi_log_mark(self.a)
        changed_at = time.monotonic()
        # The old IPv4 address goes first: removing a primary address removes its secondaries with it.
        self.ip(self.a, "addr", "del", f"{old_v4}/24", "dev", "veth0")
        self.ip(self.a, "addr", "add", f"{new_v4}/24", "dev", "veth0")
        self.ip(self.a, "addr", "add", f"{new_v6}/64", "dev", "veth0")
        self.ip(self.a, "addr", "del", f"{old_v6}/64", "dev", "veth0")
        self.restores.append(lambda: self.renumber(self.a, (new_v4, 24), (old_v4, 24), (new_v6, 64)))
        # avahi's announcement of the new address, as B's avahi-daemon sees it (by A's host name now: in one CI run
        # A's avahi-daemon was no longer h1.local after scenario 10, and waiting for h1.local timed out).
        try:
            wait_until(lambda: self.resolves_to(self.b, self.a, new_v4), 60,
                       f"B's avahi-daemon resolving A's host name to {new_v4}", poll=0.05)
        except ScenarioFailure as failure:
            raise ScenarioFailure(f"{failure}\nA's avahi-daemon log since the change:\n" +
                                  "\n".join(self.avahi_log(self.a)[log_mark:][-30:])) from None
        announced_at = time.monotonic()

        def all_connected():
            return all(set(n.connected_ids()) >= {o.peer_id for o in nodes if o is not n} for n in nodes)

        # Every connection to A ran over an address A no longer has. A notices first (its heartbeat:
        # nothing can arrive at an address it lost), reports B and C disconnected and dials them
        # again from its new addresses; B and C take A's new connection over their old one, which
        # has gone quiet (TieBreak), without reporting anything, or notice the old one dead
        # themselves. Until then they still count A as connected, and what they send meanwhile is
        # lost with the dead connection (keeping it across such a gap is the resumable-session
        # feature), so messages are sent only once A is connected again to both.
        def replaced():
            return all(a.count_lost(marks[a], other.peer_id) >= 1 and a.count_back(marks[a], other.peer_id) >= 1
                       for other in (b, c))

        wait_until(replaced, 60, "A noticing its connections over its old addresses dead and connecting again")
        wait_until(all_connected, 60, "every pair connected after A's addresses changed")
        settled_at = time.monotonic()
        drops = sum(node.count_lost(marks[node]) for node in nodes)
        after = settled_at - announced_at
        if drops:
            # Connections over A's old addresses died; they must be back within the bound of the announcement.
            reconnected = max(e.at for n in nodes for e in n.events_since(marks[n]) if e.get("event") in BACK)
            after = reconnected - announced_at
            try:
                within(after, ANNOUNCEMENT_BOUND, "reconnecting after A's addresses changed (from avahi's announcement)")
            except ScenarioFailure as failure:
                raise ScenarioFailure("\n".join([str(failure)] + [node.story() for node in nodes])) from None
            for node in nodes:
                for other in nodes:
                    if other is not node and node.count_back(marks[node], other.peer_id) > \
                            node.count_lost(marks[node], other.peer_id):
                        raise ScenarioFailure(f"{node.label} connected {other.label} more often than it lost it\n"
                                              f"{node.story()}")
        for node in nodes:
            if node.count("peerAdded", marks[node]) or node.count("peerRemoved", marks[node]):
                raise ScenarioFailure(f"{node.label} added or removed a peer when A's address changed: one peer "
                                      f"must stay one peer.\n{node.story()}")
        delivery = self.both_ways(nodes, "renumbered")
        # The connections over A's old addresses did die: their timeouts are the truth, not noise. So is a
        # redial of B or C to A's old addresses when its heartbeat noticed before A's new connection came
        # (their avahi-daemon may not have heard of A's new addresses yet), and so is B or C seeing such a
        # connection close: A closes it when its own heartbeat gives up, and its FIN can still leave from the
        # address it lost (2 of 10 runs; one CI run failed on it).
        lost_addresses = (f"[{old_v6}]:", f" {old_v4}:")
        self.no_notices(nodes, since, justified=("did not answer for", 'Cannot reach "A"') +
                        tuple((address, "closed unexpectedly") for address in lost_addresses))
        return (f"A moved from {old_v4} and {old_v6} to {new_v4} and {new_v6}; B's avahi saw it "
                f"{announced_at - changed_at:.2f} s later; {drops} connection(s) dropped and every pair was connected "
                f"{max(0.0, after):.2f} s after the announcement, each peer still one peer; slowest broadcast "
                f"{delivery * 1000:.0f} ms; no notice logged but the dead connections' timeouts and closes")

    def renumber(self, host: str, remove, add, remove_v6) -> None:
        subprocess.run(self.lan.command(host, "ip", "addr", "del", f"{remove[0]}/{remove[1]}", "dev", "veth0"),
                       capture_output=True)
        subprocess.run(self.lan.command(host, "ip", "addr", "del", f"{remove_v6[0]}/{remove_v6[1]}", "dev", "veth0"),
                       capture_output=True)
        subprocess.run(self.lan.command(host, "ip", "addr", "add", f"{add[0]}/{add[1]}", "dev", "veth0"),
                       capture_output=True)
        # The EUI-64 link-local address comes back when the interface is cycled.
        subprocess.run(self.lan.command(host, "ip", "link", "set", "veth0", "down"), capture_output=True)
        subprocess.run(self.lan.command(host, "ip", "link", "set", "veth0", "up"), capture_output=True)

    def scenario_12(self) -> str:
        """A host's interface goes down (longer than the peer timeout) and comes back up."""
        service_type = random_service_type()
        nodes, _ = self.v6_mesh(service_type, [("A", self.a), ("B", self.b), ("C", self.c)])
        a, b, c = nodes
        marks = {node: node.mark() for node in nodes}
        since = self.cursors(nodes)
        self.ip(self.a, "link", "set", "veth0", "down")
        self.restores.append(lambda: subprocess.run(self.lan.command(self.a, "ip", "link", "set", "veth0", "up"),
                                                    capture_output=True))
        for node in (b, c):
            node.wait_lost(a.peer_id, 15, "reporting A gone", marks[node])
        log_mark = self.avahi_log_mark(self.a)
        up_at = time.monotonic()
        self.ip(self.a, "link", "set", "veth0", "up")

        def announced():
            fresh = self.avahi_log(self.a)[log_mark:]
            return any("Registering new address record" in line and "veth0" in line for line in fresh)

        wait_until(announced, 30, "A's avahi-daemon registering its addresses again")
        announced_at = time.monotonic()
        back = [n.wait_back(lambda p: p.get("id") == a.peer_id, 30, "reconnecting to A", marks[n]).at
                for n in (b, c)]
        back += [a.wait_back(lambda p, o=o: p.get("id") == o.peer_id, 30, f"reconnecting to {o.name}",
                                  marks[a]).at for o in (b, c)]
        reconnected = max(back) - announced_at
        within(reconnected, ANNOUNCEMENT_BOUND, "reconnecting after A's interface came back (from avahi's "
                                                "registration of its addresses)")
        # A's own avahi-daemon withdraws what it saw on the interface that went down, so A may see B and C removed
        # and added again; but never a peer added twice.
        for node in nodes:
            if node.count("peerAdded", marks[node]) != node.count("peerRemoved", marks[node]):
                raise ScenarioFailure(f"{node.label} added a peer it already had while A's interface was down: one "
                                      f"peer must stay one peer.\n{node.story()}")
        delivery = self.both_ways(nodes, "interface back")
        # While A's interface was down, A was unreachable: that, and only that, may be said.
        for node in nodes:
            lines = [line for line in self.notices(node, since[node][0])
                     if "Cannot reach" not in line and "did not answer" not in line and "timed out" not in line
                     and "silent" not in line]
            if lines:
                raise ScenarioFailure(f"{node.label} logged a misleading notice:\n  " + "\n  ".join(lines[:10]))
        return (f"A's interface came up {announced_at - up_at:.2f} s before its avahi-daemon registered its "
                f"addresses again; every pair reconnected {reconnected:.2f} s after that, each peer still one peer; "
                f"slowest broadcast {delivery * 1000:.0f} ms")

    def scenario_14(self) -> str:
        """Peer crash on dual-stack hosts: B and C end A's session once its IPv4 and IPv6 addresses both refuse."""
        service_type = random_service_type()
        nodes, _ = self.v6_mesh(service_type, [("A", self.a), ("B", self.b), ("C", self.c)])
        a, b, c = nodes
        # Avahi resolves each family on its own: the mesh may connect on A's IPv4 address before B and C learn its
        # link-local one. The claim is about a peer known at both, so wait until their logs (--verbose) say so.
        ipv4 = self.lan.address(self.a)
        for node in (b, c):
            def knows_both(node=node):
                try:
                    lines = node.stderr_path.read_text(errors="replace").splitlines()
                except OSError:
                    return False
                return any('"A" is advertised at' in line and "[fe80::" in line and f"{ipv4}:" in line for line in lines)
            wait_until(knows_both, 30, f"{node.label} knowing A at its IPv4 and link-local IPv6 addresses")
        since = self.cursors([b, c])
        marks = {node: node.mark() for node in (b, c)}
        killed_at = time.monotonic()
        a.kill()
        gone = [node.wait(lambda e: e.get("event") == "peerDisconnected" and (e.get("peer") or {}).get("id") == a.peer_id,
                          15, "reporting the killed A disconnected", marks[node]) for node in (b, c)]
        for node, event in zip((b, c), gone):
            reason = event.get("reason") or ""
            # Both of A's addresses were tried and refused: the peer is gone only when every one of them says so.
            if ("is gone: its connection closed without a goodbye" not in reason or "fe80::" not in reason
                    or ipv4 not in reason or reason.count("Connection refused") < 2):
                raise ScenarioFailure(f"{node.label} reported the killed A disconnected without both of its addresses "
                                      f"refusing: {reason!r}.\n{node.story()}")
        ended = max(event.at for event in gone) - killed_at
        within(ended, EXIT_BOUND, "B and C ending the killed A's session")
        # What the crash makes them say: the lost connection, and that A is gone.
        self.no_notices([b, c], since, justified=("closed unexpectedly", "is gone", "Cannot reach", "reset by peer"))
        return (f"B and C disconnected the killed A {ended:.2f} s after the SIGKILL, once its IPv4 and link-local "
                f"IPv6 addresses both refused (peerExited)")
