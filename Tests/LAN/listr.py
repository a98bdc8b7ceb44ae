"""Scenario 5: the Listr example (listrd, listrctl) across hosts of the simulated LAN."""

import json
import os
import subprocess
import time

from lan import ScenarioFailure, random_service_type

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
            raise ScenarioFailure(f"{path} is missing, so Listr cannot be tested across hosts; "
                                  "build it with `swift build`.")
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

    def ctl(self, host: str, group: str, command: str, *arguments: str, peer=None) -> tuple:
        """Runs `listrctl GROUP COMMAND [options] ARGUMENTS` on `host`; returns (stdout, seconds).

        Fails with its output when it exits non-zero. The options belong to the subcommand, so they follow it.
        """
        argv = [self.binary("listrctl"), group, command, "--service-type", self.service_type, "--timeout", "30"]
        if peer is not None:
            argv += ["--peer", peer]
        argv += arguments
        started = time.monotonic()
        result = subprocess.run(self.lan.command(host, *argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        seconds = time.monotonic() - started
        if result.returncode != 0:
            logs = "\n".join(f"--- listrd {name}:\n{self.daemon_log(name)}" for name in self.daemons)
            raise ScenarioFailure(f"`listrctl {' '.join(argv[1:])}` on {host} exited with status "
                                  f"{result.returncode}:\n{result.stdout}{result.stderr}\n{logs}")
        return result.stdout, seconds

    def titles(self, host: str, peer=None) -> list:
        """The titles `listrctl item list --json` on `host` reports."""
        output, _ = self.ctl(host, "item", "list", "--json", peer=peer)
        try:
            return [item["title"] for item in json.loads(output)["items"]]
        except (ValueError, KeyError, TypeError) as error:
            raise ScenarioFailure(f"`listrctl item list --json` printed something else than {{\"items\":[…]}} "
                                  f"({error}):\n{output}") from None

    def run(self) -> str:
        a, b, c = self.scenarios.a, self.scenarios.b, self.scenarios.c
        self.start_daemon(a, "list-A")
        _, first = self.ctl(b, "item", "add", "milk")
        listed = self.titles(b)
        if listed != ["milk"]:
            raise ScenarioFailure(f"listrctl on B added 'milk' to list-A, but `item list` shows {listed}.")
        dump = self.log_dir / "dump-A.json"
        self.ctl(b, "store", "dump", str(dump))
        dumped = dump.read_text() if dump.exists() else ""
        if "<string>milk</string>" not in dumped:
            raise ScenarioFailure(f"`listrctl store dump {dump}` succeeded, but the file does not hold 'milk':\n"
                                  f"{dumped}")

        self.start_daemon(c, "list-C")
        _, picked = self.ctl(b, "item", "add", "eggs", peer="list-C")
        on_c = self.titles(b, peer="list-C")
        on_a = self.titles(b, peer="list-A")
        if on_c != ["eggs"] or on_a != ["milk"]:
            raise ScenarioFailure(f"with --peer, list-C should hold only eggs and list-A only milk, but list-C has "
                                  f"{on_c} and list-A has {on_a}.")
        return (f"listrctl on B found listrd on A and added an item in {first:.2f} s (discovery included), "
                f"listed and dumped it; with listrd on A and C, --peer list-C added in {picked:.2f} s and each "
                f"list holds only its own item")
