"""tq slot check (issue 56): a store's entries verified, and with --repair what is broken or
unreachable removed and nothing else; against the real llama-server with SmolLM2-135M and
Gemma 3 270M, a store in a directory (plain and sealed with a key) and on radosgw.

The store holds a document D, a session T appended to it, another document W and a session V
appended to W.  Then T is cut short (a truncated snapshot) and W removed (V's base is gone),
and, in a directory store, a writer's temporary an hour old and one just made are left:
- check names T, V and the old temporary, never the new one or D, and exits 1;
- --repair removes exactly T's and V's entries, W's leftovers (its index, use time, restore
  points) and the old temporary; a second check exits 0, and D's prompt still restores.
Every server is stopped at the end, also on failure."""
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FAILED, ROOT, TQ, fail, gemma, ok, smollm2  # noqa: E402
from _s3 import Store  # noqa: E402
from _server import Server, server_binary, servers_stopped  # noqa: E402

TEXT = "\n\n".join(p.read_text() for p in sorted((ROOT / "tests" / "oracle" / "prompts").glob("*.txt")))
ENV = dict(os.environ)


def tq(*args):
    p = subprocess.run([TQ, *map(str, args)], capture_output=True, text=True, env=ENV)
    return p.returncode, p.stderr.strip()


class Entries:
    """A store's entries: a directory's files, or a prefix's objects."""

    def __init__(self, store, s3):
        self.store, self.s3 = store, s3

    def names(self):
        if isinstance(self.store, Path):
            return sorted(str(p.relative_to(self.store)) for p in self.store.rglob("*")
                          if p.is_file())
        bucket, prefix = self.store[len("s3://"):].split("/", 1)
        return [k[len(prefix) + 1:] for k in self.s3.keys(bucket, prefix + "/")]

    def read(self, name):
        if isinstance(self.store, Path):
            return (self.store / name).read_bytes()
        bucket, prefix = self.store[len("s3://"):].split("/", 1)
        return self.s3.object_bytes(f"{bucket}/{prefix}/{name}")

    def write(self, name, data):
        if isinstance(self.store, Path):
            (self.store / name).write_bytes(data)
        else:
            bucket, prefix = self.store[len("s3://"):].split("/", 1)
            self.s3.put_bytes(f"{bucket}/{prefix}/{name}", data)

    def remove(self, name):
        if isinstance(self.store, Path):
            (self.store / name).unlink()
        else:
            bucket, prefix = self.store[len("s3://"):].split("/", 1)
            self.s3.curl("DELETE", f"{bucket}/{prefix}/{name}")


def sessions(server):
    """D, T, W and V (T appended to D, V to W) prefilled once and saved raw into the server's
    slot folder: (the text of D's prompt, {key: raw file name}).  Each store's saves restore
    these: the same cells as a prefill each time, in milliseconds rather than seconds."""
    toks = server.tokenize(TEXT)
    d_text = server.detokenized(toks[:600])
    d = server.tokenize(d_text)  # a prompt's tokens as the server makes them from its text
    w = toks[:1] + toks[700:1300]
    t, v = d + toks[1400:1500], w + toks[1500:1600]
    raw = {}
    for k, x in (("D", d), ("T", t), ("W", w), ("V", v)):
        if k in "DW":
            server.slot("erase")
        server.prefill(x)  # T and V extend the D and W the slot holds
        raw[k] = f"raw-{k}.bin"
        server.slot("save", raw[k])
    return d_text, raw


def save(server, slots, store, model, raw, keys):
    """Slot 0 restored from the raw file, saved into the store: the snapshot's name."""
    server.slot("erase")
    server.slot("restore", raw)
    rc, err = tq("slot", "save", "--server", f"http://127.0.0.1:{server.port}", "--slot-dir",
                 slots, "--store", store, "--model", model, *keys)
    m = re.search(r"stored as ([0-9a-f]+-[0-9a-f]+)", err)
    if rc or not m:
        raise SystemExit(f"save: exit {rc}: {err}")
    return m.group(1)


def check_store(server, slots, model, store, s3, keys, work, suffix, held):
    d_text, raw = held
    names = {k: save(server, slots, store, model, raw[k], keys) for k in "DTWV"}
    e = Entries(store, s3)
    root = ""
    if keys:  # a key's entries are a folder of their own
        root = next(n for n in e.names() if n.startswith("k-")).split("/", 1)[0] + "/"
    before = e.names()
    snap = {k: f"{root}snap/{n}.tqkv" for k, n in names.items()}
    rc0, err0 = tq("slot", "check", store, *keys)
    data = e.read(snap["T"])
    e.write(snap["T"], data[:len(data) // 2])
    e.remove(snap["W"])
    old = new = None
    if isinstance(store, Path):
        old, new = store / f"{root}snap/x.tqkv.tmp.AAAAAA", store / f"{root}snap/y.tqkv.tmp.BBBBBB"
        old.write_bytes(b"partial")
        new.write_bytes(b"partial")
        os.utime(old, (time.time() - 7200, time.time() - 7200))

    name = "check_names_a_truncated_snapshot_and_a_link_whose_base_is_gone" + suffix
    rc, err = tq("slot", "check", store, *keys)
    lines = err.splitlines()
    told = lambda key: any(f"snap/{names[key]}.tqkv" in l for l in lines)  # noqa: E731
    temps_ok = old is None or (any(old.name in l for l in lines) and
                               not any(new.name in l for l in lines))
    if rc0 or rc != 1 or not told("T") or not told("V") or told("D") or not temps_ok:
        fail(name, f"clean: exit {rc0} ({err0}); planted: exit {rc}: {err[-1500:]}")
    else:
        ok(name)

    name = "repair_removes_exactly_the_broken_and_unreachable" + suffix
    rc, err = tq("slot", "check", store, "--repair", *keys)
    rc2, err2 = tq("slot", "check", store, *keys)
    after = e.names()
    gone = {names[k] for k in "TWV"}
    want = [n for n in before if not any(g in n for g in gone)]
    if new is not None:
        want = sorted(want + [str(new.relative_to(store))])
    restore_ok = True
    if not rc and not rc2:
        server.slot("erase")
        doc = work / "d.txt"
        doc.write_text(d_text)
        rc3, err3 = tq("slot", "restore", "--server", f"http://127.0.0.1:{server.port}",
                       "--slot-dir", slots, "--store", store, "--prompt", doc, "--model", model,
                       *keys)
        restore_ok = rc3 == 0 and names["D"] in err3
        if not restore_ok:
            print(f"  restore: exit {rc3}: {err3}")
    if rc or rc2 or after != want or not restore_ok:
        extra = sorted(set(after) - set(want))
        lost = sorted(set(want) - set(after))
        fail(name, f"repair exit {rc}, then check exit {rc2} ({err2[-300:]}); left over {extra}"
                   f", lost {lost}; D restores {restore_ok}")
    else:
        ok(name)


def run_model(binary, model, label, s3):
    global ENV
    with tempfile.TemporaryDirectory() as td:
        work = Path(td)
        slots = work / "slots"
        slots.mkdir()
        keyfile = work / "key"
        keyfile.write_bytes(bytes(range(40, 72)))
        keyfile.chmod(0o600)
        with Server(binary, model, slots) as server:
            held = sessions(server)
            ENV = dict(os.environ)
            check_store(server, slots, model, work / "plain", None, [], work, f"_{label}", held)
            check_store(server, slots, model, work / "sealed", None, ["--key-file", keyfile],
                        work, f"_{label}_sealed", held)
            ENV = s3.tq_env()
            s3.bucket(f"check-{label}")
            check_store(server, slots, model, f"s3://check-{label}/store", s3, [], work,
                        f"_{label}_on_s3", held)


def main():
    binary = server_binary()
    with Store() as s3:
        run_model(binary, smollm2(), "smollm2", s3)
        run_model(binary, gemma(), "gemma", s3)
    servers_stopped()
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
