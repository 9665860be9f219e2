"""Crashes (issue 56): `tq slot save` (whole and appended), `tq slot gc` and `tq slot proxy`
killed with SIGKILL at every change they make to a store (TQ_CRASH_AT=N: the Nth change, for
N = 1, 2, ... until the command completes) and at random moments, over a directory store and
radosgw, with SmolLM2-135M and Gemma 3 270M; at least 200 kills in all (make test: every
change point and 4 random moments a series, at least 150; make test-full, TQ_TEST_FULL=1, 14
random moments).  After each:
- `tq slot check --repair` leaves the store clean: a second `check` exits 0;
- each session saved before the kill (a document D, and T, D and a question, appended to D)
  restores into another server as the raw save byte for byte (the lossless preset: the
  server's own save of the restored slot), or as its stored prefix's (T's prompt restoring D),
  or is a miss; never another session, never a failure.
Loops are bounded in count and time, loopback only; every server is stopped at the end."""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FAILED, FULL, ROOT, TQ, fail, gemma, ok, smollm2  # noqa: E402
from _proxy import Proxy  # noqa: E402
from _s3 import Store  # noqa: E402
from _server import Server, server_binary, servers_stopped  # noqa: E402

TEXT = "\n\n".join(p.read_text() for p in sorted((ROOT / "tests" / "oracle" / "prompts").glob("*.txt")))
MAX_POINTS = 60  # a save or gc makes fewer changes than this; more is a runaway
RANDOM_KILLS = 14 if FULL else 4  # a kind of command, a store, a model
MIN_KILLS = 200 if FULL else 150
ENV = dict(os.environ)
KILLS = []


def run(*args, env=None, kill_after=None):
    """tq ARGS: (exit status, stderr); SIGKILL after kill_after seconds (exit -9)."""
    p = subprocess.Popen([TQ, *map(str, args)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=env or ENV)
    try:
        _, err = p.communicate(timeout=kill_after if kill_after is not None else 300)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)
        _, err = p.communicate()
    return p.returncode, err.strip()


class World:
    """Servers holding D and T in their slot 0 (a server of one slot: a slot file of a server
    of several restores only into one of as many), b restoring; raw: their raw saves."""

    def __init__(self, holders, b, model, work, s3):
        self.holders, self.b, self.model, self.work, self.s3 = holders, b, model, work, s3
        a = holders["D"]
        toks = a.tokenize(TEXT)
        doc = a.detokenized(toks[:600]).rstrip() + "."
        piece = a.detokenized(toks[:1] + toks[900:960]).strip()
        self.texts = {"D": doc, "T": f"{doc} Question: {piece}"}
        self.files = {}
        self.raw = {}
        self.proxied = []  # T's prompt restored from the sessions a proxy saves (proxy_series)
        for k in "DT":
            self.files[k] = work / f"{k}.txt"
            self.files[k].write_text(self.texts[k])
            holders[k].prefill(holders[k].tokenize(self.texts[k]))
            holders[k].slot("save", f"raw{k}.bin")
            self.raw[k] = (Path(holders[k].slots) / f"raw{k}.bin").read_bytes()
        assert a.tokenize(self.texts["T"])[:len(a.tokenize(doc))] == a.tokenize(doc)

    def save_args(self, k, store):
        a = self.holders[k]
        return ["slot", "save", "--server", f"http://127.0.0.1:{a.port}", "--slot-dir", a.slots,
                "--store", store, "--model", self.model, "--preset", "lossless"]

    def verify(self, store):
        """'' when every session restores as saved or misses, else what went wrong."""
        for k in "DT":
            self.b.slot("erase")
            rc, err = run("slot", "restore", "--server", f"http://127.0.0.1:{self.b.port}",
                          "--slot-dir", self.b.slots, "--store", store, "--prompt",
                          self.files[k], "--model", self.model)
            if rc == 3:
                continue
            if rc:
                return f"{k}: restore exit {rc}: {err}"
            self.b.slot("save", "again.bin")
            again = (Path(self.b.slots) / "again.bin").read_bytes()
            # T's prompt may restore D, its prefix, where T is not stored (whole or at all), or
            # the session a proxy saved (T's cells as the server made them after D's restore)
            allowed = [self.raw["D"]] if k == "D" else [self.raw["D"], self.raw["T"]]
            allowed += self.proxied if k == "T" else []
            if again not in allowed:
                return f"{k}: the restore is none of the sessions saved ({err})"
        return ""


def fresh(world, kind, template):
    """A store holding what template names ('', 'D', 'DT'), for one kill."""
    fresh.n += 1
    if kind == "dir":
        store = world.work / f"store{fresh.n}"
        if template:
            shutil.copytree(world.work / f"template-{template}", store)
        return store
    store = f"s3://crash/{world.model.stem[:8]}-{fresh.n}"
    for k in template:
        rc, err = run(*world.save_args(k, store))
        assert rc == 0, err
    return store


fresh.n = 0


def after_kill(world, store, what):
    """Repair, check, verify: '' or what went wrong."""
    rc, err = run("slot", "check", store, "--repair")
    rc2, err2 = run("slot", "check", store)
    if rc2:
        return f"{what}: check after repair exit {rc2}: {err2[-400:]} (repair: {err[-400:]})"
    bad = world.verify(store)
    return f"{what}: {bad}" if bad else ""


def kill_series(world, kind, label, command, template, env_extra=None):
    """command(store) -> args: killed at every change, then at random moments."""
    problems = []
    points = 0
    took = 0.5
    for n in range(1, MAX_POINTS + 1):
        store = fresh(world, kind, template)
        env = dict(ENV, TQ_CRASH_AT=str(n), **(env_extra or {}))
        t0 = time.time()
        rc, err = run(*command(store), env=env)
        if rc != -signal.SIGKILL:  # past its last change: it completed
            points = n - 1
            took = time.time() - t0
            if rc:
                problems.append(f"{label} with no crash: exit {rc}: {err}")
            break
        KILLS.append(label)
        bad = after_kill(world, store, f"{label} killed at change {n}")
        if bad:
            problems.append(bad)
    else:
        problems.append(f"{label}: more than {MAX_POINTS} changes")
    rng = random.Random(label)
    for i in range(RANDOM_KILLS):
        store = fresh(world, kind, template)
        t0 = time.time()
        rc, _ = run(*command(store), kill_after=rng.uniform(0.01, max(0.02, 0.95 * took)))
        if rc == -signal.SIGKILL:
            KILLS.append(label)
        bad = after_kill(world, store, f"{label} killed after {time.time() - t0:.2f} s")
        if bad:
            problems.append(bad)
    return points, problems


def proxy_once(world, store, n, delay):
    """One request through a proxy in front of b (T's prompt: D restored, T saved after it),
    killed at its nth change to the store (n > 0) or after delay seconds: 1 when it was."""
    world.b.slot("erase")
    env = dict(ENV, TQ_CRASH_AT=str(n))
    with Proxy(world.b, store, "--preset", "lossless", "--model", world.model, env=env,
               log=world.work / "proxy.log") as p:
        timer = threading.Timer(delay, lambda: p.proc.send_signal(signal.SIGKILL)) \
            if delay else None
        if timer:
            timer.start()
        body = json.dumps({"prompt": world.texts["T"], "n_predict": 1, "id_slot": 0,
                           "cache_prompt": True}).encode()
        req = urllib.request.Request(p.url + "/completion", body,
                                     {"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=120).read()
        except OSError:
            pass  # the proxy died under the request
        end = time.time() + 120
        while time.time() < end and p.proc.poll() is None and not p.lines(r": complete$"):
            time.sleep(0.05)
        if timer:
            timer.cancel()
        return p.proc.poll() == -signal.SIGKILL


def proxy_series(world, kind, label):
    problems = []
    points = 0
    # what T's prompt restores as from each snapshot a proxy's request stores, without a kill:
    # the winner's re-save, then the winner removed, until D or a miss
    store = fresh(world, kind, "D")
    t0 = time.time()
    proxy_once(world, store, 0, 0)
    took = time.time() - t0
    world.proxied = []
    for _ in range(4):
        world.b.slot("erase")
        rc, err = run("slot", "restore", "--server", f"http://127.0.0.1:{world.b.port}",
                      "--slot-dir", world.b.slots, "--store", store, "--prompt",
                      world.files["T"], "--model", world.model)
        m = re.search(r"restored from ([0-9a-f]+-[0-9a-f]+)", err)
        if rc or not m:
            break
        world.b.slot("save", "proxied.bin")
        world.proxied.append((Path(world.b.slots) / "proxied.bin").read_bytes())
        run("slot", "check", store, "--repair")  # its leftovers after it is removed
        if isinstance(store, Path):
            (store / "snap" / f"{m.group(1)}.tqkv").unlink()
        else:
            bucket, prefix = store[len("s3://"):].split("/", 1)
            world.s3.curl("DELETE", f"{bucket}/{prefix}/snap/{m.group(1)}.tqkv")
        run("slot", "check", store, "--repair")
    for n in range(1, MAX_POINTS + 1):
        store = fresh(world, kind, "D")
        if not proxy_once(world, store, n, 0):
            points = n - 1
            break
        KILLS.append(label)
        bad = after_kill(world, store, f"{label} killed at change {n}")
        if bad:
            problems.append(bad)
    rng = random.Random(label)
    for i in range(RANDOM_KILLS):
        store = fresh(world, kind, "D")
        delay = rng.uniform(0.05, max(0.1, 0.95 * took))
        if proxy_once(world, store, 0, delay):
            KILLS.append(label)
        bad = after_kill(world, store, f"{label} killed after {delay:.2f} s")
        if bad:
            problems.append(bad)
    return points, problems


def crashes(world, kind, suffix):
    if kind == "dir":  # the stores a save, an appended save and gc start from
        for template in ("D", "DT"):
            store = world.work / f"template-{template}"
            for k in template:
                rc, err = run(*world.save_args(k, store))
                assert rc == 0, err
    series = [
        ("a_killed_save_leaves_a_store_check_repairs", lambda s: world.save_args("D", s), ""),
        ("a_killed_appended_save_leaves_a_store_check_repairs",
         lambda s: world.save_args("T", s), "D"),
        ("a_killed_gc_leaves_a_store_check_repairs",
         lambda s: ["slot", "gc", s, "--max-size", "1"], "DT"),
    ]
    series.append(("a_killed_proxy_leaves_a_store_check_repairs", None, "D"))
    for name, command, template in series:
        if command is None:
            points, problems = proxy_series(world, kind, name + suffix)
        else:
            points, problems = kill_series(world, kind, name + suffix, command, template)
        if problems or not points:
            fail(name + suffix, f"{points} changes; {problems[:3]}")
        else:
            print(f"  {name}{suffix}: {points} changes, each killed, and {RANDOM_KILLS} tries "
                  f"at random moments", flush=True)
            ok(name + suffix)


def run_model(binary, model, label, s3):
    global ENV
    with tempfile.TemporaryDirectory() as td:
        work = Path(td)
        d_dir, t_dir, b_dir = work / "d", work / "t", work / "b"
        for d in (d_dir, t_dir, b_dir):
            d.mkdir()
        with Server(binary, model, d_dir) as a_d, Server(binary, model, t_dir) as a_t, \
                Server(binary, model, b_dir) as b:
            ENV = dict(os.environ)
            world = World({"D": a_d, "T": a_t}, b, model, work, s3)
            crashes(world, "dir", f"_{label}")
            ENV = s3.tq_env()
            crashes(world, "s3", f"_{label}_on_s3")


def main():
    binary = server_binary()
    with Store() as s3:
        s3.bucket("crash")
        run_model(binary, smollm2(), "smollm2", s3)
        run_model(binary, gemma(), "gemma", s3)
    name = f"at_least_{MIN_KILLS}_kills"
    if len(KILLS) < MIN_KILLS:
        fail(name, f"{len(KILLS)} kills")
    else:
        print(f"  {len(KILLS)} kills", flush=True)
        ok(name)
    servers_stopped()
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
