"""The mesh figures: N `peerkit node` processes on 127.0.0.1 in a full mesh, idle.

For each N: the time from starting the processes to every node connected to every other; then,
with nothing sent, the CPU all N processes use together (percent of one core), the TCP segments
per connection per second (both directions, read from each socket's tcp_info `segs_out` through
`ss -tin`, so other traffic on the machine does not count), and the resident memory per
connection (the mesh's total RSS minus N lone nodes', divided by the connections). Last, one node
is frozen with SIGSTOP (its kernel still acknowledges TCP, so only PeerKit's heartbeat can tell)
and the figure is how long the slowest of the others takes to report it suspended (sessions on,
the default) or disconnected.

Node i dials nodes 0..i-1 through static peers, as `make stress` does, so every pair has one link
and Avahi is not involved.

The CPU per exchange has two floors, the same mesh built with less (`measure_floor_mesh`): the
same connections, the same beats, frames of the same size, as many threads per node as NIO's default
event loops, and nothing else. `rawbench mesh` is raw C with epoll; `peerkit-bench nio-mesh` is bare
SwiftNIO (its event loops, NIOExtras' LengthFieldBasedFrameDecoder and a handler that answers pings).
"""

import os
import re
import select
import signal
import socket
import subprocess
import threading
import time

from processes import BenchError

# PeerConfiguration's default heartbeatInterval, which `peerkit node` keeps: each link makes one
# heartbeat exchange (ping, pong and their ACKs) per interval, so the idle CPU divided by
# links ÷ interval is the CPU of one exchange, both ends and their wake-ups included (issue 34's goal 4).
HEARTBEAT_SECONDS = 1.25
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


class MeshNode:
    """One `peerkit node`, its stdout read on a thread into connected/disconnected sets."""

    def __init__(self, binary, service_type, index, port, dial_ports):
        self.name = f"node-{index}"
        self.lock = threading.Lock()
        self.connected = set()
        self.disconnected_at = {}
        arguments = [binary, "node", service_type, "--name", self.name, "--json",
                     "--listen-host", "127.0.0.1", "--port", str(port)]
        for other in dial_ports:
            arguments += ["--static", f"127.0.0.1:{other}"]
        self.popen = subprocess.Popen(arguments, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True, bufsize=1)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        import json
        for line in self.popen.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            kind = event.get("event")
            name = event.get("peer", {}).get("name")
            with self.lock:
                if kind == "peerConnected":
                    self.connected.add(name)
                elif kind == "peerDisconnected":
                    self.connected.discard(name)
                    self.disconnected_at.setdefault(name, time.monotonic())
                elif kind == "peerSuspended":
                    # Sessions on (the default): a peer that stops answering is suspended, and
                    # disconnected only once its resume window (30 s) ran out. Suspended is noticed.
                    self.disconnected_at.setdefault(name, time.monotonic())

    def count(self):
        with self.lock:
            return len(self.connected)

    def cpu_seconds(self):
        """The CPU time of all the node's threads, to the nanosecond: its process CPU clock
        (clock_getcpuclockid(3); Linux numbers it from the PID). /proc/PID/stat counts in clock
        ticks (10 ms), and a window's CPU of 8 idle nodes was 1 to 3 of them."""
        return time.clock_gettime_ns(process_cpu_clock(self.popen.pid)) / 1e9

    def rss_kib(self):
        with open(f"/proc/{self.popen.pid}/statm") as statm:
            return int(statm.read().split()[1]) * PAGE_KIB

    def end(self):
        if self.popen.poll() is None:
            try:
                os.kill(self.popen.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.popen.terminate()
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def free_ports(count):
    """`count` distinct free TCP ports on 127.0.0.1 (bound and released at once)."""
    sockets, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in sockets:
            s.close()
    return ports


# `ss -tinH state established`: "RECV-Q SEND-Q LOCAL:PORT PEER:PORT", then a tab-indented tcp_info line.
SS_LINE = re.compile(r"^\d+\s+\d+\s+\S+:(\d+)\s+\S+:(\d+)")


def mesh_segments(ports):
    """Total segments sent so far by every established socket with an end on one of `ports`."""
    output = subprocess.run(["ss", "-tinH", "state", "established"], capture_output=True, text=True, check=True).stdout
    total, counting = 0, False
    for line in output.splitlines():
        match = SS_LINE.match(line.strip()) if not line.startswith(("\t", " ")) else None
        if match:
            counting = int(match.group(1)) in ports or int(match.group(2)) in ports
            continue
        if counting:
            found = re.search(r"\bsegs_out:(\d+)", line)
            if found:
                total += int(found.group(1))
            counting = False
    return total


def process_cpu_clock(pid):
    """The clock ID of `pid`'s CPU time, as glibc's clock_getcpuclockid makes it (Linux's
    MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)); Python has no call for another process's."""
    return ((~pid) << 3) | 2


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise BenchError(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(0.05)


def idle_windows(cpu_seconds, windows):
    """Each of `windows` windows of two heartbeat intervals (a node's idle links ping on one shared
    beat, so every window holds the same number of beats): (the CPU `cpu_seconds()` grew by, the
    window's wall time), both as measured, not as slept."""
    window_cpu = []
    cpu_before, at = cpu_seconds(), time.monotonic()
    for _ in range(windows):
        time.sleep(2 * HEARTBEAT_SECONDS)
        cpu_now, now = cpu_seconds(), time.monotonic()
        window_cpu.append((cpu_now - cpu_before, now - at))
        cpu_before, at = cpu_now, now
    return window_cpu


def per_exchange(window_cpu, links):
    """The CPU of one heartbeat exchange in µs, one sample per window: each link makes one exchange
    per interval."""
    return [1e6 * seconds / wall / (links / HEARTBEAT_SECONDS) for seconds, wall in window_cpu]


def lone_node_rss(binary, service_type):
    """RSS of one node with no peers, once it has settled."""
    port = free_ports(1)[0]
    node = MeshNode(binary, service_type, 0, port, [])
    try:
        time.sleep(2)
        if node.popen.poll() is not None:
            raise BenchError("a lone `peerkit node` exited at once")
        return node.rss_kib()
    finally:
        node.end()


def measure_mesh(binary, service_type, count, windows=4, lone_rss=None):
    """The figures for one mesh of `count` nodes (see the module's description). The idle CPU is
    read over `windows` windows of two heartbeat intervals each (a node's idle links ping on one
    shared beat, so every window holds the same number of beats): the CPU per exchange is one
    sample per window, so that its spread is measured, not assumed."""
    if count > 4 and (os.sysconf("SC_OPEN_MAX") < 4 * count):
        raise BenchError(f"the descriptor limit ({os.sysconf('SC_OPEN_MAX')}) is too low for {count} nodes")
    ports = free_ports(count)
    links = count * (count - 1) // 2
    started = time.monotonic()
    nodes = [MeshNode(binary, service_type, i, ports[i], ports[:i]) for i in range(count)]
    try:
        wait_for(lambda: all(node.count() == count - 1 for node in nodes), 120 + count, f"the {count}-node full mesh")
        mesh_seconds = time.monotonic() - started
        time.sleep(3)  # settle: handshakes' and first pings' traffic is not idle traffic
        if any(node.count() != count - 1 for node in nodes):
            raise BenchError(f"a link of the {count}-node mesh dropped while idle")
        segments_before = mesh_segments(set(ports))
        window_cpu = idle_windows(lambda: sum(node.cpu_seconds() for node in nodes), windows)
        segments = mesh_segments(set(ports)) - segments_before
        cpu = sum(seconds for seconds, _ in window_cpu)
        idle_seconds = sum(wall for _, wall in window_cpu)
        rss = sum(node.rss_kib() for node in nodes)
        if any(node.count() != count - 1 for node in nodes):
            raise BenchError(f"a link of the {count}-node mesh dropped while idle")
        # Peer loss: freeze the last node; the others must notice through the heartbeat alone.
        frozen = nodes[-1]
        os.kill(frozen.popen.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        others = nodes[:-1]
        wait_for(lambda: all(frozen.name in node.disconnected_at for node in others), 60, "noticing a frozen node")
        detection = max(node.disconnected_at[frozen.name] for node in others) - stopped
        figures = {
            "meshSeconds": mesh_seconds,
            "idleCPUPercent": 100 * cpu / idle_seconds,
            "segmentsPerConnectionPerSecond": segments / links / idle_seconds,
            "lossDetectionSeconds": detection,
            "cpuPerExchangeMicroseconds": per_exchange(window_cpu, links),
        }
        if lone_rss is not None:
            figures["rssPerConnectionKiB"] = (rss - count * lone_rss) / links
        return figures
    finally:
        for node in nodes:
            node.end()


def measure_floor_mesh(command, count, windows=4):
    """A floor of the idle mesh's CPU per exchange: `count` processes of `command` (a list:
    `[rawbench, "mesh"]` or `[peerkit-bench, "nio-mesh"]`, to which `--index I --ports P0,...
    --timeout S` are added) in a full mesh on 127.0.0.1, idle but for the heartbeat, their CPU
    read over the same windows as `measure_mesh`'s. Each node exits on its own after its
    --timeout if this process dies before ending it."""
    ports = free_ports(count)
    links = count * (count - 1) // 2
    port_list = ",".join(str(port) for port in ports)
    nodes = []
    try:
        for index in range(count):
            nodes.append(subprocess.Popen(command + ["--index", str(index), "--ports", port_list, "--timeout", str(120 + count)],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        # Every node says ready once it holds its N-1 connections; one that fails exits, and the
        # others would wait for it until their timeout: stop at the first exit.
        waiting = set(nodes)
        deadline = time.monotonic() + 120 + count
        while waiting:
            readable, _, _ = select.select([node.stdout for node in waiting], [], [], 0.2)
            for node in [node for node in waiting if node.stdout in readable]:
                if '"ready"' in node.stdout.readline():
                    waiting.discard(node)
            if any(node.poll() is not None for node in nodes) or time.monotonic() > deadline:
                raise BenchError(f"the {count}-node `{command[-1]}` mesh did not form: {first_complaint(nodes)}")
        time.sleep(3)  # the same settling as PeerKit's mesh
        cpu = lambda: sum(time.clock_gettime_ns(process_cpu_clock(node.pid)) for node in nodes) / 1e9
        window_cpu = idle_windows(cpu, windows)
        if any(node.poll() is not None for node in nodes):
            raise BenchError(f"a node of the {count}-node `{command[-1]}` mesh exited while idle: {first_complaint(nodes)}")
        return {"cpuPerExchangeMicroseconds": per_exchange(window_cpu, links)}
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
            node.wait()


def first_complaint(nodes):
    """What the first of `nodes` to say something on stderr said, once all are ended: a node that
    fails makes the others wait for it until their timeout, so the cause is the one that spoke."""
    for node in nodes:
        if node.poll() is None:
            node.kill()
    for node in nodes:
        _, errors = node.communicate()
        if errors.strip():
            return errors.strip().splitlines()[0]
    return "no node said why (each ends itself after its --timeout)"
