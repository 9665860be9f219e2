"""Shared by the proxy's tests and benchmark (not a test itself): `tq slot proxy` started on
127.0.0.1 with a free port in front of a llama-server (tests/oracle/_server.py), its log kept,
and always stopped (SIGTERM, as a service manager stops it; SIGKILL when the test dies)."""
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from _env import TQ
from _server import STARTED, _die_with_parent


class Proxy:
    """with Proxy(server, store, "--preset", "lossless") as p: p.url ...  The server's slot
    folder is its own (server.slots)."""

    def __init__(self, server, store, *flags, log=None, env=None, tq=None):
        self.server, self.store, self.flags = server, str(store), list(flags)
        self.log = Path(log or Path(server.slots).parent / "proxy.log")
        self.env, self.tq = env, tq or TQ
        self.proc = None
        self.exit_code = None

    def __enter__(self):
        cmd = [self.tq, "slot", "proxy", "--server", f"http://127.0.0.1:{self.server.port}",
               "--slot-dir", str(self.server.slots), "--store", self.store,
               "--listen", "127.0.0.1:0", *self.flags]
        self._log = open(self.log, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env,
                                     preexec_fn=_die_with_parent)
        end = time.time() + 30
        while time.time() < end and self.proc.poll() is None:
            m = re.search(r"listening on \S+ \(port (\d+)\)", self.log.read_text(errors="replace"))
            if m:
                self.port = int(m.group(1))
                self.url = f"http://127.0.0.1:{self.port}"
                STARTED.append((self.proc.pid, self.port))
                return self
            time.sleep(0.05)
        self.stop()
        raise SystemExit(f"tq slot proxy did not start: {self.text()[-500:]}")

    def __exit__(self, *exc):
        self.stop()
        return False

    def stop(self, timeout=90):
        """SIGTERM: it drains and exits; its exit status kept in exit_code."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.exit_code = self.proc.returncode
            self._log.close()
        self.proc = None

    def text(self):
        return self.log.read_text(errors="replace")

    def lines(self, pattern):
        return [l for l in self.text().splitlines() if re.search(pattern, l)]

    def wait_requests(self, n, timeout=60):
        """Until n generations have been logged (a request's line follows its answer)."""
        end = time.time() + timeout
        while time.time() < end:
            if len(self.lines(r"^tq slot: /\S*completion\S* \d+ slot")) >= n:
                return True
            time.sleep(0.05)
        return False

    def wait_idle(self, timeout=60):
        """Until no save is pending (after a request's line: its saves are complete)."""
        end = time.time() + timeout
        while time.time() < end:
            if self.metrics().get("tq_proxy_saves_pending", 1) == 0:
                return True
            time.sleep(0.05)
        return False

    def wait_saves(self, n, timeout=120):
        """Until n saves have said they are complete (the log's "complete" lines)."""
        end = time.time() + timeout
        while time.time() < end:
            if len(self.lines(r": complete$")) >= n:
                return True
            time.sleep(0.05)
        return False

    def metrics(self, key=None):
        hdr = {"Authorization": f"Bearer {key}"} if key else {}
        req = urllib.request.Request(f"{self.url}/tq/metrics", headers=hdr)
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read().decode()
        return {m.group(1): float(m.group(2))
                for m in re.finditer(r"^(tq_proxy_\w+) (\S+)$", text, re.M)}


def raw_files(slots):
    """The files a proxy left in a slot folder (none should be)."""
    return sorted(p.name for p in Path(slots).iterdir()) if Path(slots).exists() else []


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
