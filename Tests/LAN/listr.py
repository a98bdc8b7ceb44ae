"""Scenario 5: the Listr example (listrd, listrctl) across hosts of the simulated LAN."""

import os
import subprocess
import time

from lan import ScenarioFailure, random_service_type, wait_until

COMMAND_TIMEOUT = 60


class Listr:
    """listrd on A, listrctl on B finds it by mDNS and runs add/list/dump; then listrd on A and C, and --peer picks."""

    def __init__(self, scenarios):
        self.scenarios = scenarios
        self.lan = scenarios.lan
        self.bin_dir = scenarios.bin_dir
        self.log_dir = scenarios.log_dir
        self.service_type = random_service_type()
        self.daemons = {}

    def binary(self, name: str) -> str:
        path = self.bin_dir / name
        if not os.access(path, os.X_OK):
            raise ScenarioFailure(f"{path} is missing, so Listr cannot be tested across hosts; build it with `swift build`.")
        return str(path)

    def start_daemon(self, host: str, name: str) -> None:
        store = self.log_dir / f"listr-{name}.json"
        log = open(self.log_dir / f"listrd-{name}.log", "w")
        process = subprocess.Popen(self.lan.command(host, self.binary("listrd"), "--store", str(store), "--name", name,
                                                    "--service-type", self.service_type),
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.scenarios.processes.append(process)
        self.daemons[name] = process
        # listrctl's own --timeout covers discovery, so there is nothing to wait for here but an immediate failure.
        if process.poll() is not None:
            raise ScenarioFailure(f"listrd {name} on {host} exited at once:\n{self.daemon_log(name)}")

    def daemon_log(self, name: str) -> str:
        try:
            return (self.log_dir / f"listrd-{name}.log").read_text()[-3000:]
        except OSError:
            return "(no log)"

    def ctl(self, host: str, *arguments: str, peer=None) -> tuple:
        """Runs listrctl on `host`; returns (stdout, seconds). Fails with its output when it exits non-zero."""
        argv = [self.binary("listrctl"), "--service-type", self.service_type, "--timeout", "30"]
        if peer is not None:
            argv += ["--peer", peer]
        started = time.monotonic()
        result = subprocess.run(self.lan.command(host, *argv, *arguments), capture_output=True, text=True,
                                timeout=COMMAND_TIMEOUT)
        seconds = time.monotonic() - started
        if result.returncode != 0:
            logs = "\n".join(f"--- listrd {name}:\n{self.daemon_log(name)}" for name in self.daemons)
            raise ScenarioFailure(f"`listrctl {' '.join(argv[1:] + list(arguments))}` on {host} exited with status "
                                  f"{result.returncode}:\n{result.stdout}{result.stderr}\n{logs}")
        return result.stdout, seconds

    def run(self) -> str:
        a, b, c = self.scenarios.a, self.scenarios.b, self.scenarios.c
        self.start_daemon(a, "list-A")
        _, first = self.ctl(b, "item", "add", "milk")
        listed, _ = self.ctl(b, "item", "list")
        if "milk" not in listed:
            raise ScenarioFailure(f"listrctl on B added 'milk' to list-A, but `item list` does not show it:\n{listed}")
        dump = self.log_dir / "dump-A.json"
        self.ctl(b, "store", "dump", str(dump))
        wait_until(lambda: dump.exists() and "milk" in dump.read_text(), 10, f"the dump {dump} containing 'milk'")

        self.start_daemon(c, "list-C")
        _, picked = self.ctl(b, "item", "add", "eggs", peer="list-C")
        on_c, _ = self.ctl(b, "item", "list", peer="list-C")
        on_a, _ = self.ctl(b, "item", "list", peer="list-A")
        if "eggs" not in on_c or "milk" in on_c:
            raise ScenarioFailure(f"`--peer list-C item list` should show eggs and not milk:\n{on_c}")
        if "milk" not in on_a or "eggs" in on_a:
            raise ScenarioFailure(f"`--peer list-A item list` should show milk and not eggs:\n{on_a}")
        return (f"listrctl on B found listrd on A and added an item in {first:.2f} s (discovery included), "
                f"listed and dumped it; with listrd on A and C, --peer list-C added in {picked:.2f} s and each "
                f"list holds only its own item")
