"""One `peerkit node` process on one simulated host: its JSON-line events, timestamped on arrival, and its stdin."""

import json
import signal
import subprocess
import threading
import time
from pathlib import Path

from lan import Lan, ScenarioFailure, end_process


# A peer whose link is lost is reported suspended while a resumable session keeps it (issue 32), disconnected without
# one; it comes back resumed (the same session) or connected (a new one).
LOST = ("peerDisconnected", "peerSuspended")
BACK = ("peerConnected", "peerResumed")


class Event(dict):
    """One line of the node's stdout, with `at`: time.monotonic() when the line arrived."""

    at: float


class Node:
    """Starts `peerkit node` inside `host` and keeps everything it reports.

    Events are timestamped by a reader thread as they arrive, so measured figures do not depend on how often the
    scenario polls. Waits always take a cursor (`mark()`), so an event from before the step under test never counts.
    """

    def __init__(self, lan: Lan, host: str, binary: Path, service_type: str, name: str, log_dir: Path,
                 extra: tuple = ()):
        self.host = host
        self.name = name
        self.label = f"{name}@{host}"
        self.events: list = []
        self.peer_id = None
        self._lock = threading.Lock()
        argv = [str(binary), "node", service_type, "--name", name, *extra]
        self.stderr_path = log_dir / f"{name}-{host}-{time.monotonic_ns()}.stderr"
        self.started_at = time.monotonic()
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen(lan.command(host, *argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            stderr=stderr, text=True, bufsize=1)
        self.pid = self.process.pid
        self._reader = threading.Thread(target=self._read, name=f"read {self.label}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            arrived = time.monotonic()
            try:
                event = Event(json.loads(line))
            except json.JSONDecodeError:
                event = Event({"event": "unparsable", "line": line.rstrip("\n")})
            event.at = arrived
            with self._lock:
                self.events.append(event)

    # MARK: Events

    def mark(self) -> int:
        """A cursor: waits given it only consider events that arrive after this call."""
        with self._lock:
            return len(self.events)

    def find(self, predicate, since: int = 0):
        """The first event at or after `since` for which `predicate` holds, or None."""
        with self._lock:
            return next((event for event in self.events[since:] if predicate(event)), None)

    def wait(self, predicate, timeout: float, what: str, since: int = 0) -> Event:
        """Waits for the first event (after `since`) that satisfies `predicate`; fails with the node's story if none."""
        deadline = time.monotonic() + timeout
        while True:
            event = self.find(predicate, since)
            if event is not None:
                return event
            if self.process.poll() is not None:
                raise ScenarioFailure(f"{self.label} exited with status {self.process.returncode} while waiting "
                                      f"for {what}.\n{self.story()}")
            if time.monotonic() >= deadline:
                raise ScenarioFailure(f"{self.label}: {what} did not happen within {timeout:.0f} s.\n{self.story()}")
            time.sleep(0.02)

    def wait_started(self, timeout: float = 30) -> None:
        event = self.wait(lambda e: e.get("event") == "started", timeout, "the 'started' event")
        self.peer_id = event.get("peerID")
        if not self.peer_id:
            raise ScenarioFailure(f"{self.label} reported 'started' without a peerID: {dict(event)}")

    def connected_ids(self, since: int = 0) -> dict:
        """Peer id -> the arrival time of its latest peerConnected or peerResumed, for peers connected now (per the
        events: a suspended peer is not)."""
        connected = {}
        with self._lock:
            for event in self.events[since:]:
                peer = event.get("peer") or {}
                if event.get("event") in BACK:
                    connected[peer.get("id")] = event.at
                elif event.get("event") in LOST:
                    connected.pop(peer.get("id"), None)
        return connected

    def knows_advertisement(self, peer_id: str) -> bool:
        """Whether this node resolved the peer's advertisement: the peer's info in its events holds the
        TXT record's `sec`, which PeerKit advertises and never sends in a hello."""
        with self._lock:
            for event in self.events:
                peers = [event.get("peer") or {}] + list(event.get("peers") or [])
                if any(peer.get("id") == peer_id and "sec" in (peer.get("info") or {}) for peer in peers):
                    return True
        return False

    def wait_connected(self, predicate_on_peer, timeout: float, what: str, since: int = 0) -> Event:
        return self.wait(lambda e: e.get("event") == "peerConnected" and predicate_on_peer(e.get("peer") or {}),
                         timeout, what, since)

    def wait_disconnected(self, peer_id: str, timeout: float, what: str, since: int = 0) -> Event:
        return self.wait(lambda e: e.get("event") == "peerDisconnected" and (e.get("peer") or {}).get("id") == peer_id,
                         timeout, what, since)

    def wait_lost(self, peer_id: str, timeout: float, what: str, since: int = 0) -> Event:
        """Waits for the peer to be reported suspended or disconnected."""
        return self.wait(lambda e: e.get("event") in LOST and (e.get("peer") or {}).get("id") == peer_id, timeout, what, since)

    def wait_back(self, predicate_on_peer, timeout: float, what: str, since: int = 0) -> Event:
        """Waits for a peer to be reported connected or resumed."""
        return self.wait(lambda e: e.get("event") in BACK and predicate_on_peer(e.get("peer") or {}), timeout, what, since)

    def count_lost(self, since: int = 0, peer_id=None) -> int:
        return sum(self.count(kind, since, peer_id) for kind in LOST)

    def count_back(self, since: int = 0, peer_id=None) -> int:
        return sum(self.count(kind, since, peer_id) for kind in BACK)

    def wait_message(self, text: str, sender_id: str, timeout: float, since: int = 0) -> Event:
        return self.wait(lambda e: e.get("event") == "message" and e.get("text") == text
                         and (e.get("from") or {}).get("id") == sender_id,
                         timeout, f"the message {text!r}", since)

    def events_since(self, since: int = 0) -> list:
        """A copy of the events that arrived after the cursor `since`."""
        with self._lock:
            return list(self.events[since:])

    def count(self, kind: str, since: int = 0, peer_id=None) -> int:
        with self._lock:
            return sum(1 for e in self.events[since:]
                       if e.get("event") == kind and (peer_id is None or (e.get("peer") or {}).get("id") == peer_id))

    # MARK: Commands and signals

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def broadcast(self, text: str) -> None:
        self.send(f"broadcast {text}")

    def kill(self) -> None:
        """SIGKILL: the process vanishes without a goodbye (the kernel still closes its sockets)."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        """Graceful stop (SIGTERM), SIGKILL if it does not exit within 10 s."""
        end_process(self.process)

    def alive(self) -> bool:
        return self.process.poll() is None

    def story(self, lines: int = 25) -> str:
        """The node's last events and stderr lines, for failure messages."""
        with self._lock:
            events = [f"  +{e.at - self.started_at:7.3f}s {json.dumps(dict(e))}" for e in self.events[-lines:]]
        try:
            stderr = self.stderr_path.read_text().splitlines()[-lines:]
        except OSError:
            stderr = []
        return (f"--- last events of {self.label} (pid {self.pid}):\n" + "\n".join(events or ["  (none)"]) +
                f"\n--- last stderr lines of {self.label}:\n" + "\n".join("  " + l for l in stderr or ["(none)"]))
