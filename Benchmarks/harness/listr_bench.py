"""The Listr store and watch figures: `item add` on an empty store and on a store of 200,000
items, `store replace` and `store dump` of those 200,000 items, and how long after the adding
client gets its answer every watcher prints the change. All through the real listrctl dialling
the real listrd with --connect (no discovery in the figures), wall time of whole processes."""

import queue
import statistics
import subprocess
import threading
import time

from listr_store import write_items_plist
from processes import BenchError

STORE_ITEMS = 200_000
WATCHERS = 4


def timed_ms(run):
    begin = time.monotonic()
    completed = run()
    elapsed = (time.monotonic() - begin) * 1000
    if completed.returncode != 0:
        text = " ".join((completed.stderr or completed.stdout or f"exit status {completed.returncode}").split())
        raise BenchError(f"listrctl failed: {text[:300]}")
    return elapsed


def store_figures(suite, runs):
    """Samples (ms) for listr.store.*: add on an empty store and on one of 200,000 items, and
    replace and dump of those 200,000 items."""
    def body(ctl, folder, port):
        at = ["--connect", f"127.0.0.1:{port}"]
        samples = {"listr.store.add.empty": [], "listr.store.add.200k": [],
                   "listr.store.replace.200k": [], "listr.store.dump.200k": []}
        for index in range(runs):
            samples["listr.store.add.empty"].append(
                timed_ms(lambda: ctl("item", "add", f"Empty-store item {index}", options=at)))
        plist = folder / "store-200k.plist"
        write_items_plist(plist, STORE_ITEMS)
        for run in range(3):
            samples["listr.store.replace.200k"].append(
                timed_ms(lambda: ctl("store", "replace", str(plist), options=at, timeout=300)))
            out = folder / f"dump-{run}.plist"
            samples["listr.store.dump.200k"].append(
                timed_ms(lambda: ctl("store", "dump", str(out), options=at, timeout=300)))
            out.unlink()
        for index in range(runs):
            samples["listr.store.add.200k"].append(
                timed_ms(lambda: ctl("item", "add", f"Big-store item {index}", options=at)))
        return samples
    return suite.with_listrd(body)


class LineReader:
    """The lines a process prints, each with the monotonic time it was read, on a thread."""

    def __init__(self, popen):
        self.lines = queue.Queue()
        threading.Thread(target=self._read, args=(popen,), daemon=True).start()

    def _read(self, popen):
        for line in popen.stdout:
            self.lines.put((time.monotonic(), line))
        self.lines.put((time.monotonic(), None))

    def wait_for(self, text, timeout):
        deadline = time.monotonic() + timeout
        while True:
            try:
                stamp, line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                raise BenchError(f"no line with {text!r} within {timeout} s") from None
            if line is None:
                raise BenchError(f"the process ended before printing {text!r}")
            if text in line:
                return stamp


def watch_latencies(suite, runs):
    """For each add: when the last of 4 watchers printed it, minus when the adding listrctl
    printed its answer (ms; negative when every watcher was first)."""
    def body(ctl, folder, port):
        at = ["--connect", f"127.0.0.1:{port}", "--service-type", ctl.service]
        command = [ctl.listrctl, "watch", "--json", *at]
        watchers = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                    for _ in range(WATCHERS)]
        try:
            readers = [LineReader(watcher) for watcher in watchers]
            for reader in readers:
                reader.wait_for('"event":"list"', 30)
            samples = []
            for index in range(runs):
                title = f"Watched item {index}"
                adder = subprocess.Popen([ctl.listrctl, "item", "add", title, *at, "--timeout", "30"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                try:
                    answered = LineReader(adder).wait_for(f'"{title}"', 30)
                    seen = max(reader.wait_for(f'"title":"{title}"', 30) for reader in readers)
                finally:
                    adder.wait(timeout=30)
                samples.append((seen - answered) * 1000)
            return samples
        finally:
            for watcher in watchers:
                watcher.terminate()
                watcher.wait(timeout=10)
    return suite.with_listrd(body)
