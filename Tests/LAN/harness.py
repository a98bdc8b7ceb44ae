"""What every scenario needs: nodes on hosts, a full mesh, message delivery, published records, CPU checks."""

import os
import subprocess
import time
from pathlib import Path

from lan import Lan, ScenarioFailure, cpu_share, end_process, wait_until
from node import Node

# PeerKit's defaults: a heartbeat every 0.5 s, a peer is lost after 2.5 s of silence; so a vanished peer is reported
# at most 2.5 + 0.5 s after it last spoke. The issue asks for reconnection within 3 s of the link coming back.
DETECTION_BOUND = 3.0
RECONNECT_BOUND = 3.0
# Scheduling allowance on a loaded machine (2 shared cores); the printed figures are the raw measurements.
SLACK = float(os.environ.get("LAN_TIMING_SLACK", "0.5"))
# While a peer is unreachable, a node must stay idle: no busy redial loop.
CPU_LIMIT = 0.10
CPU_WINDOW = 4.0
# Generous deadlines for things that are not timed (discovery, startup) on a busy machine.
EVENTUALLY = 60.0


def within(figure: float, bound: float, what: str) -> None:
    """Fails the scenario when a measured figure exceeds its bound (plus the scheduling allowance)."""
    if figure > bound + SLACK:
        raise ScenarioFailure(f"{what} took {figure:.2f} s; the bound is {bound:.1f} s "
                              f"(+{SLACK:.1f} s scheduling allowance, LAN_TIMING_SLACK).")


class Harness:
    """Shared by the scenarios: the LAN, the binaries, and the processes to clean up after each scenario."""

    def __init__(self, lan: Lan, bin_dir: Path, log_dir: Path):
        self.lan = lan
        self.bin_dir = bin_dir
        self.log_dir = log_dir
        self.nodes: list = []
        self.processes: list = []
        # Undo steps for changes a scenario made inside hosts (addresses, interfaces), run last first.
        self.restores: list = []
        self.a, self.b, self.c = lan.hosts[:3]

    # MARK: Helpers

    def node(self, host: str, service_type: str, name: str, *extra: str) -> Node:
        node = Node(self.lan, host, self.bin_dir / "peerkit", service_type, name, self.log_dir, extra)
        self.nodes.append(node)
        return node

    def cleanup(self) -> None:
        """Stops what the scenario started and undoes the faults it injected, so a failure never spills over."""
        for node in self.nodes:
            node.stop()
        for process in self.processes:
            end_process(process)
        for restore in reversed(self.restores):
            restore()
        self.nodes.clear()
        self.processes.clear()
        self.restores.clear()
        self.lan.restore()

    def stories(self) -> str:
        return "\n".join(node.story() for node in self.nodes)

    def mesh(self, service_type: str, names_and_hosts) -> tuple:
        """Starts one node per (name, host) at once; returns the nodes and the seconds until all were connected."""
        start = time.monotonic()
        nodes = [self.node(host, service_type, name) for name, host in names_and_hosts]
        for node in nodes:
            node.wait_started()
        ids = {node.peer_id for node in nodes}
        if len(ids) != len(nodes):
            raise ScenarioFailure(f"two nodes reported the same peerID: {[n.peer_id for n in nodes]}")

        def fully_connected():
            arrivals = []
            for node in nodes:
                connected = node.connected_ids()
                if node.peer_id in connected:
                    raise ScenarioFailure(f"{node.label} reports a connection to itself.\n{node.story()}")
                others = ids - {node.peer_id}
                if not others <= connected.keys():
                    return None
                arrivals += [connected[other] for other in others]
            return max(arrivals)

        try:
            connected_at = wait_until(fully_connected, EVENTUALLY, "every node connected to every other")
        except ScenarioFailure as failure:
            raise ScenarioFailure(f"{failure}\n{self.stories()}") from None
        return nodes, connected_at - start

    def deliver(self, sender: Node, receivers, text: str) -> float:
        """Broadcasts `text` from `sender`; returns the seconds until the last receiver had it."""
        marks = [receiver.mark() for receiver in receivers]
        sent = time.monotonic()
        sender.broadcast(text)
        arrivals = [receiver.wait_message(text, sender.peer_id, 15, since=mark).at
                    for receiver, mark in zip(receivers, marks)]
        return max(arrivals) - sent

    def publish(self, host: str, instance: str, service_type: str, port: int, *txt: str) -> None:
        """Publishes a service record on `host` with avahi-publish, until the scenario ends."""
        argv = self.lan.command(host, "avahi-publish", "--service", instance, f"_{service_type}._tcp", str(port), *txt)
        self.processes.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def idle_cpu(self, nodes) -> str:
        """Measures the nodes' CPU while a peer is unreachable; fails on anything like a busy loop."""
        shares = cpu_share([node.pid for node in nodes], CPU_WINDOW)
        for node in nodes:
            if shares[node.pid] > CPU_LIMIT:
                raise ScenarioFailure(f"{node.label} used {shares[node.pid]:.0%} of a core while a peer was "
                                      f"unreachable (limit {CPU_LIMIT:.0%}): a busy redial loop?\n{node.story()}")
        return ", ".join(f"{node.label} {shares[node.pid]:.1%}" for node in nodes)
