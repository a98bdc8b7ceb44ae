"""Child processes of a measurement: started, read as JSON lines, bounded in time, ended by PID."""

import collections
import json
import queue
import subprocess
import threading
import time
from pathlib import Path


class BenchError(Exception):
    """A measurement could not be made; the run goes on and the figure is reported unavailable."""


class Process:
    """A child process whose stdout JSON lines are collected on a thread."""

    def __init__(self, command, label, stdin=False, env=None):
        self.label = label
        self.command = command
        self.lines = queue.Queue()
        self.stderr_tail = collections.deque(maxlen=200)
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
            self.stderr_tail.append(line.rstrip())

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
        """The last line the process wrote on stderr, for error messages."""
        if not self.stderr_tail:
            return ""
        last = self.stderr_tail[-1]
        return ": " + (last if len(last) <= 400 else last[:400] + "…")


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
    except BenchError as error:
        raise BenchError(f"{error}{save_logs(processes)}") from None
    finally:
        for process in reversed(processes):
            process.end()


# Where the stderr of the processes of a failed measurement is kept (set by bench.py).
failure_log_dir = None


def save_logs(processes):
    """Writes the last stderr lines of each process to failure_log_dir; returns a note naming the files."""
    if failure_log_dir is None:
        return ""
    failure_log_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for process in processes:
        path = failure_log_dir / f"{describe(process.command).replace(' ', '-')}-{process.popen.pid}.log"
        path.write_text(" ".join(process.command) + "\n" + "\n".join(process.stderr_tail) + "\n")
        paths.append(str(path))
    return f" (stderr in {', '.join(paths)})"


def describe(command):
    """`rawbench sink`, `zmqbench.py push`, … for messages."""
    if command[0] == "taskset":
        command = command[3:]
    if command[0].endswith("python") or "/python" in command[0]:
        command = command[1:]
    return f"{Path(command[0]).name} {command[1]}"


def pinned(command, pin):
    return ["taskset", "-c", "0"] + command if pin else command
