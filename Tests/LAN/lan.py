"""The simulated LAN (scripts/lan) seen from the scenarios, plus the small process and timing helpers they share."""

import os
import random
import signal
import string
import subprocess
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
LAN_SCRIPT = REPOSITORY / "scripts" / "lan"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class ScenarioFailure(Exception):
    """A scenario did not behave as required; the message says what was expected and what happened."""


def random_service_type() -> str:
    """A fresh DNS-SD service type ("t" + 8 lowercase letters/digits), so no two scenarios ever see each other."""
    return "t" + "".join(random.choices(string.ascii_lowercase + string.digits, k=8))


def wait_until(predicate, timeout: float, what: str, poll: float = 0.02):
    """Polls `predicate` until it returns something truthy (which is returned) or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise ScenarioFailure(f"{what} did not happen within {timeout:.0f} s.")
        time.sleep(poll)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far, from /proc/PID/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    # After "pid (comm) ", utime and stime are the 12th and 13th fields (14 and 15 of the full line).
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def cpu_share(pids, seconds: float) -> dict:
    """Each process's share of one core over the next `seconds` seconds (0.0 to 1.0)."""
    before = {pid: cpu_seconds(pid) for pid in pids}
    start = time.monotonic()
    time.sleep(seconds)  # a measurement window, not a wait for an event
    elapsed = time.monotonic() - start
    return {pid: (cpu_seconds(pid) - before[pid]) / elapsed for pid in pids}


def end_process(process: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM a process we started (by its PID), then SIGKILL it if it is still there after `grace` seconds."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


class Lan:
    """Drives scripts/lan for the LAN that scripts/lan-test brought up (found through $PEERKIT_LAN_DIR)."""

    def __init__(self):
        self.hosts = self._run("hosts").split()
        if len(self.hosts) < 3:
            raise ScenarioFailure(f"the scenarios need at least 3 hosts, but the LAN has {len(self.hosts)}; "
                                  "run: scripts/lan up 3")

    def _run(self, *arguments: str) -> str:
        result = subprocess.run([str(LAN_SCRIPT), *arguments], capture_output=True, text=True)
        if result.returncode != 0:
            raise ScenarioFailure(f"`scripts/lan {' '.join(arguments)}` failed: {result.stderr.strip()}")
        return result.stdout

    def command(self, host: str, *argv: str) -> list:
        """The argv that runs `argv` inside `host`; the resulting process has the PID of `argv[0]` itself."""
        return [str(LAN_SCRIPT), "exec", host, *argv]

    def run(self, host: str, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """Runs a command inside `host` to completion."""
        return subprocess.run(self.command(host, *argv), capture_output=True, text=True, timeout=timeout)

    def state_dir(self) -> Path:
        """Where scripts/lan keeps this LAN's state and logs (each host's avahi.log is in <dir>/<host>/)."""
        return Path(os.environ.get("PEERKIT_LAN_DIR", "/tmp/peerkit-lan"))

    def ipv6(self) -> bool:
        """Whether the LAN was brought up with --ipv6."""
        return self._run("ipv6").strip() == "yes"

    def prefix(self) -> str:
        """The run's namespace prefix: the bridge is <prefix>-br, host hK is <prefix>-hK."""
        return (Path(os.environ.get("PEERKIT_LAN_DIR", "/tmp/peerkit-lan")) / "prefix").read_text().strip()

    def root_links_into_lan(self) -> list:
        """Root-namespace interfaces whose other end is in one of this LAN's namespaces (there must be none)."""
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
        return [line for line in links.splitlines() if f"link-netns {self.prefix()}-" in line]

    def address(self, host: str) -> str:
        return self._run("addr", host).strip()

    def link_down(self, host: str) -> None:
        self._run("link-down", host)

    def link_up(self, host: str) -> None:
        self._run("link-up", host)

    def partition(self, host: str) -> None:
        self._run("partition", host)

    def heal(self, host: str) -> None:
        self._run("heal", host)

    def avahi_stop(self, host: str) -> None:
        self._run("avahi-stop", host)

    def avahi_start(self, host: str) -> None:
        self._run("avahi-start", host)

    def pid(self, host: str, process: str) -> int:
        return int(self._run("pid", host, process))

    def restore(self) -> None:
        """Undoes every fault a scenario may have left: links up, partitions healed, every avahi-daemon running."""
        for host in self.hosts:
            self.link_up(host)
            self.heal(host)
            if subprocess.run([str(LAN_SCRIPT), "pid", host, "avahi"], capture_output=True).returncode != 0:
                self.avahi_start(host)

    def browse(self, host: str, service_type: str):
        """The resolved instances `avahi-browse` on `host` sees now, as sorted (name, address, port) tuples.

        Returns None when avahi-browse did not finish within 10 s (it can wait on a resolver for a service that is
        going away); callers poll again.
        """
        try:
            result = self.run(host, "avahi-browse", "--resolve", "--parsable", "--terminate", f"_{service_type}._tcp",
                              timeout=10)
        except subprocess.TimeoutExpired:
            return None
        if result.returncode != 0:
            raise ScenarioFailure(f"avahi-browse on {host} failed: {result.stderr.strip()}")
        found = set()
        for line in result.stdout.splitlines():
            fields = line.split(";")
            if fields[0] == "=" and len(fields) >= 9:
                found.add((unescape(fields[3]), fields[7], int(fields[8])))
        return sorted(found)

    def instance_names(self, host: str, service_type: str) -> set:
        """The instance names in `host`'s avahi-daemon cache now, without resolving them (never waits on a resolver)."""
        result = self.run(host, "avahi-browse", "--parsable", "--terminate", "--no-db-lookup", f"_{service_type}._tcp")
        if result.returncode != 0:
            raise ScenarioFailure(f"avahi-browse on {host} failed: {result.stderr.strip()}")
        return {unescape(line.split(";")[3]) for line in result.stdout.splitlines()
                if line.startswith("+;") and line.count(";") >= 5}


def unescape(label: str) -> str:
    r"""avahi-browse --parsable escapes bytes as \DDD (decimal); turn them back into text."""
    raw = bytearray()
    index = 0
    while index < len(label):
        if label[index] == "\\" and label[index + 1:index + 4].isdigit():
            raw.append(int(label[index + 1:index + 4]))
            index += 4
        else:
            raw.extend(label[index].encode())
            index += 1
    return raw.decode(errors="replace")
