"""tq slot against hostile names, planted store entries and a server that stalls or lies
(issue 47), on a directory store, with a server of our own (_fake_server.py) where the real
one cannot be made to misbehave.  Each behaviour one line (ok / FAIL); a sentinel folder beside
the store is hashed before and after every hostile case: nothing outside the store or the
slot folder is created, changed or read into a message.
TQ_BIN=build/tests/tq-san runs the same under ASan/UBSan (tests/cli/sanitized.sh)."""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FAILED, TQ, fail, ok  # noqa: E402
from _fake_server import FakeServer, model, state, tokens_of  # noqa: E402

ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=1")


def tq(*args, timeout=60):
    """tq ARGS: (exit status, stderr, seconds); a run past timeout is exit -9."""
    t0 = time.time()
    try:
        p = subprocess.run([TQ, *map(str, args)], capture_output=True, text=True,
                           timeout=timeout, env=ENV)
        return p.returncode, p.stderr.strip(), time.time() - t0, p.stdout
    except subprocess.TimeoutExpired as e:
        return -9, (e.stderr or b"").decode(errors="replace"), time.time() - t0, ""


def tree_hash(folder):
    """Every file's path, kind and bytes under folder."""
    h = hashlib.sha256()
    for p in sorted(Path(folder).rglob("*")):
        h.update(str(p).encode())
        if p.is_symlink():
            h.update(b"L" + os.readlink(p).encode())
        elif p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def one_line(rc, err, want_rc, needle):
    return rc == want_rc and len(err.splitlines()) == 1 and needle in err


class Case:
    def __init__(self, work, sentinel):
        self.work, self.sentinel = work, sentinel

    def check(self, name, cond, why):
        """A behaviour that held, and the sentinel as it was."""
        if not cond:
            return fail(name, why)
        if tree_hash(self.sentinel) != SENTINEL_HASH[0]:
            return fail(name, "the sentinel folder changed")
        ok(name)


SENTINEL_HASH = [""]


def names(c, srv, slots, store):
    """Store names are data, never paths: refused in one line before anything is read."""
    s = ["--server", srv.url, "--slot-dir", slots, "--store", store]
    bad = ["../../sentinel/precious.txt", "../sentinel/new/x", "/abs/name", "a/b/c",
           "ctl\x01name", ".hidden", "x" * 200, "../snap/entry.tqkv", ""]
    results = [tq("slot", "save", *s, "--name", n) for n in bad]
    c.check("save_refuses_a_name_that_is_a_path",
            all(one_line(rc, err, 2, "--name:") for rc, err, _, _ in results) and
            not list(Path(slots).iterdir()),
            f"{[(rc, err) for rc, err, _, _ in results]}")
    for target in ("../../../../etc/passwd", "../../../../dev/zero"):
        rc, err, secs, _ = tq("slot", "restore", *s, "--name", target, timeout=20)
        c.check(f"restore_name_{Path(target).name}_is_refused_unread",
                one_line(rc, err, 2, "--name") and "root:" not in err,
                f"exit {rc} in {secs:.1f} s: {err}")
    # a name entry planted to point outside: no such snapshot
    (Path(store) / "names").mkdir(parents=True, exist_ok=True)
    (Path(store) / "names" / "planted").write_text("../../../../etc/passwd")
    rc, err, _, _ = tq("slot", "restore", *s, "--name", "planted")
    c.check("a_planted_name_entry_is_no_such_snapshot",
            one_line(rc, err, 1, "no snapshot named") and "root:" not in err, f"exit {rc}: {err}")


def entries(c, srv, slots, store):
    """Planted entries: symlinks to devices, FIFOs, garbage; ls stays bounded and valid JSON."""
    srv.mode = "ok"
    srv.tokens = tokens_of(300)
    s = ["--server", srv.url, "--slot-dir", slots, "--store", store]
    rc, err, _, _ = tq("slot", "save", *s, "--preset", "lossless")
    c.check("a_session_saves", rc == 0, f"exit {rc}: {err}")
    snap = next((Path(store) / "snap").glob("*.tqkv"))
    name = snap.name[:-5]
    used = Path(store) / "used" / name
    used.unlink()
    used.symlink_to("/dev/zero")
    os.mkfifo(Path(store) / "used" / "0000000000000000-0000000000000001")
    (Path(store) / "snap" / "0000000000000000-0000000000000000.tqkv").write_bytes(b"garbage")
    rc, err, secs, out = tq("slot", "ls", store, "--json", timeout=20)
    try:
        listed = json.loads(out)
    except ValueError:
        listed = None
    c.check("ls_of_planted_entries_is_bounded_and_valid_json",
            rc == 0 and isinstance(listed, list) and len(listed) == 1 and
            listed[0]["name"] == name, f"exit {rc} in {secs:.1f} s: {err}; stdout {out[:200]!r}")
    # a snapshot whose recorded base name holds quotes: data in the JSON, never keys
    work = Path(slots).parent
    (work / "b.ggsq").write_bytes(state(tokens_of(256)))
    (work / "l.ggsq").write_bytes(state(tokens_of(280)))
    quoted = work / 'a","x":"y.tqkv'
    tq("encode-kvdump", work / "b.ggsq", "-o", quoted, "--head-dim", "8", "-q")
    rc, err, _, _ = tq("encode-kvdump", work / "l.ggsq", "--append", quoted, "-o",
                       Path(store) / "snap" / "00000000000000ff-00000000000000ff.tqkv",
                       "--head-dim", "8", "-q")
    rc2, err2, _, out = tq("slot", "ls", store, "--json", timeout=20)
    try:
        listed = {e["name"]: e for e in json.loads(out)}
    except ValueError:
        listed = {}
    entry = listed.get("00000000000000ff-00000000000000ff", {})
    c.check("ls_json_keeps_a_quoted_base_name_as_data",
            rc == 0 and rc2 == 0 and entry.get("base") == quoted.name and
            set(entry) == {"name", "model", "tokens", "bytes", "age_s", "base"},
            f"exit {rc} ({err}), ls exit {rc2} ({err2}): {out[:300]!r}")
    (Path(store) / "snap" / "00000000000000ff-00000000000000ff.tqkv").unlink()
    # a store folder planted as a link out of the store: nothing read or written through it
    names_dir = Path(store) / "names"
    for p in names_dir.iterdir():
        p.unlink()
    names_dir.rmdir()
    names_dir.symlink_to(c.sentinel)
    rc, err, _, _ = tq("slot", "restore", *s, "--name", "precious.txt")
    rc2, err2, _, _ = tq("slot", "save", *s, "--name", "planted", "--preset", "lossless")
    c.check("a_store_folder_that_is_a_link_is_not_followed",
            one_line(rc, err, 1, "not a folder of the store") and rc2 == 1 and
            "not a folder of the store" in err2 and "keep me" not in err + err2,
            f"restore exit {rc}: {err}; save exit {rc2}: {err2}")
    names_dir.unlink()
    srv.restored.clear()
    rc, err, secs, _ = tq("slot", "restore", *s, "--prompt", Path(slots).parent / "prompt.txt",
                          timeout=20)
    c.check("restore_past_a_used_entry_that_is_a_device",
            rc == 0 and srv.restored and srv.restored[-1] == state(tokens_of(300)),
            f"exit {rc} in {secs:.1f} s: {err}")


def server_lies(c, srv, slots, store):
    """A server that stalls, floods or answers out of range: one line, exit 1, nothing left."""
    s = ["--server", srv.url, "--slot-dir", slots, "--store", store, "--timeout", "3"]
    cases = [("stall", "save", "no answer within"), ("flood", "save", "no answer within"),
             ("big_props", "save", "more than"), ("escape", "save", "HTTP 500"),
             ("negative", "restore", "not a count"), ("tokens_text", "restore", "not a token list"),
             ("token_2_40", "restore", "not a token id"), ("n_saved_huge", "save", "not JSON"),
             ("link_file", "save", "not a regular file")]
    srv.link_target = str(c.sentinel / "precious.txt")
    for mode, action, needle in cases:
        srv.mode = mode
        srv.tokens = tokens_of(300)
        extra = ["--prompt", Path(slots).parent / "prompt.txt"] if action == "restore" else []
        model_opt = [] if mode == "big_props" else ["--model", srv.model_path]
        rc, err, secs, _ = tq("slot", action, *s, *model_opt, *extra, timeout=30)
        left = [p.name for p in Path(slots).iterdir()]
        c.check(f"a_server_answering_{mode}_is_one_line",
                one_line(rc, err, 1, needle) and "\x1b" not in err and "\x07" not in err and
                not left and secs < 20,
                f"exit {rc} in {secs:.1f} s: {err!r}; left in --slot-dir {left}")
    srv.mode = "ok"


def long_prompts(c, srv, slots, store):
    """Prefix hashing is linear: a prompt of 8M tokens (its first 300 the stored session's) is
    found or missed, not hashed for minutes."""
    srv.mode = "ok"
    srv.tokens = tokens_of(8_000_000)
    s = ["--server", srv.url, "--slot-dir", slots, "--store", store]
    rc, err, secs, _ = tq("slot", "restore", *s, "--prompt", Path(slots).parent / "prompt.txt",
                          timeout=120)
    c.check("a_prompt_of_8m_tokens_is_a_prompt_not_a_hang", rc in (0, 3),
            f"exit {rc} in {secs:.1f} s: {err[-200:]}")
    srv.tokens = tokens_of(300)


def store_faults(c, srv, slots, store):
    """A store that cannot record a use after a restore: a warning, the restore stands."""
    s = ["--server", srv.url, "--slot-dir", slots, "--store", store]
    used = Path(store) / "used"
    for p in used.iterdir():
        p.unlink()
    used.rmdir()
    used.write_text("not a folder")
    srv.restored.clear()
    rc, err, _, _ = tq("slot", "restore", *s, "--prompt", Path(slots).parent / "prompt.txt")
    c.check("a_restore_into_a_store_that_cannot_record_its_use_warns",
            rc == 0 and "warning" in err and srv.restored, f"exit {rc}: {err}")
    used.unlink()


def temps(c, store):
    """gc removes a writer's temporary over an hour old (a process that died), not a fresh one."""
    snap = Path(store) / "snap"
    snap.mkdir(parents=True, exist_ok=True)
    old, fresh = snap / "x.tqkv.tmp.AAAAAA", snap / "y.tqkv.tmp.BBBBBB"
    old.write_bytes(b"left by a killed writer")
    fresh.write_bytes(b"being written")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    rc, err, _, _ = tq("slot", "gc", store, "--max-size", "1T")
    c.check("gc_removes_temporaries_over_an_hour_old", rc == 0 and not old.exists() and
            fresh.exists() and "temporary files" in err, f"exit {rc}: {err}")
    fresh.unlink()


def broken_chain(c, srv, slots, store):
    """A link whose base is gone (removed by hand): the restore warns and takes the next-best
    prefix (here none: a miss), never a crash or an error."""
    s = ["--server", srv.url, "--slot-dir", slots, "--store", store]
    srv.mode = "ok"
    srv.tokens = tokens_of(256)
    rc1, err1, _, _ = tq("slot", "save", *s, "--preset", "lossless")
    base = next(p for p in (Path(store) / "snap").glob("*.tqkv"))
    srv.tokens = tokens_of(300, salt=7)
    rc2, err2, _, _ = tq("slot", "save", *s, "--preset", "lossless")
    base.unlink()
    rc, err, _, _ = tq("slot", "restore", *s, "--prompt", Path(slots).parent / "prompt.txt")
    c.check("a_restore_whose_base_is_gone_takes_the_next_best_prefix",
            rc1 == 0 and rc2 == 0 and "appended" in err2 and rc == 3 and "warning" in err and
            "miss" in err, f"saves {rc1} {rc2} ({err2}); restore exit {rc}: {err}")


def full_store(c, srv, slots, work):
    """A store on a full disk (a 64 KiB tmpfs, as root): one line naming the store's file, the
    raw slot file gone, nothing half-written left."""
    mnt = Path(work) / "tiny"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs",
                                            str(mnt)], capture_output=True).returncode:
        print("  a_full_store_names_the_stores_file: skipped (mounting a tmpfs needs root)")
        return
    try:
        srv.mode = "ok"
        srv.tokens = tokens_of(2000)
        rc, err, _, _ = tq("slot", "save", "--server", srv.url, "--slot-dir", slots, "--store",
                           mnt / "store", "--preset", "lossless")
        left = [p.name for p in Path(slots).iterdir()]
        temps = [str(p) for p in mnt.rglob("*.tmp.*")]
        c.check("a_full_store_names_the_stores_file",
                one_line(rc, err, 1, str(mnt / "store")) and "No space left" in err and
                not left and not temps, f"exit {rc}: {err}; left {left}; temporaries {temps}")
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        srv.tokens = tokens_of(300)


def chains_whole(store):
    """Every appended snapshot's base is stored ('' when so)."""
    p = subprocess.run([TQ, "slot", "ls", store, "--json"], capture_output=True, text=True,
                       env=ENV)
    listed = json.loads(p.stdout or "[]")
    names = {e["name"] + ".tqkv" for e in listed}
    return next((f"{e['name']} needs {e['base']}" for e in listed
                 if e["base"] and e["base"] not in names), "")


def race(c, srv, slots, store):
    """A save appending to a base races gc --max-size 0, 100 times: no chain is left without
    its base, and every stored session restores as it was saved."""
    import threading
    s = ["--server", srv.url, "--slot-dir", slots, "--store", store]
    prompt = Path(slots).parent / "prompt.txt"
    broken, wrong = "", []
    for i in range(100):
        srv.mode = "ok"
        srv.tokens = tokens_of(256)
        tq("slot", "save", *s, "--preset", "lossless")  # the base, stored again if evicted
        srv.tokens = tokens_of(300, salt=i + 1)
        results = {}
        gc = threading.Thread(target=lambda: results.setdefault(
            "gc", tq("slot", "gc", store, "--max-size", "0")))
        gc.start()
        results["save"] = tq("slot", "save", *s, "--preset", "lossless")
        gc.join()
        broken = broken or chains_whole(store)
        srv.restored.clear()
        rc, err, _, _ = tq("slot", "restore", *s, "--prompt", prompt)
        # the session, or its base where gc took the session: as it was saved, byte for byte
        if rc == 0 and srv.restored[-1] not in (state(tokens_of(300, salt=i + 1)),
                                                state(tokens_of(256))):
            wrong.append(i)
        if rc not in (0, 3) or results["save"][0] or results["gc"][0]:
            wrong.append((i, rc, err, results["save"][:2], results["gc"][:2]))
    c.check("a_save_racing_gc_leaves_no_chain_without_its_base", not broken and not wrong,
            f"{broken}; {wrong[:3]}")


def s3_names(c):
    """S3 keys are what the user typed, endpoints http or https: refused before a request."""
    env = dict(ENV, AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="y",
               AWS_ENDPOINT_URL="http://127.0.0.1:9")
    src = Path(__file__).resolve().parents[1] / "fuzz" / "seeds" / "fuzz_state_read" / "stories16.ggsq"
    for url, needle in (("s3://bucket/../other/key.tqkv", "'..' segment"),
                        ("s3://bucket/a/./b.tqkv", "'..' segment")):
        p = subprocess.run([TQ, "encode-kvdump", src, "-o", url], capture_output=True, text=True,
                           env=env, timeout=30)
        c.check(f"an_s3_key_with_dot_segments_is_refused_{'dotdot' if '..' in url else 'dot'}",
                one_line(p.returncode, p.stderr.strip(), 1, needle), f"{p.returncode}: {p.stderr}")
    for ep in ("file:///etc/passwd", "ftp://127.0.0.1/"):
        p = subprocess.run([TQ, "encode-kvdump", src, "-o", "s3://bucket/k.tqkv"],
                           capture_output=True, text=True, env=dict(env, AWS_ENDPOINT_URL=ep),
                           timeout=30)
        c.check(f"an_endpoint_not_http_is_refused_{ep.split(':')[0]}",
                one_line(p.returncode, p.stderr.strip(), 1, "http:// or https://"),
                f"{p.returncode}: {p.stderr}")


def main():
    with tempfile.TemporaryDirectory() as td:
        work = Path(td)
        sentinel = work / "sentinel"
        sentinel.mkdir()
        (sentinel / "precious.txt").write_text("keep me")
        slots = work / "slots"
        slots.mkdir()
        store = work / "store" / "inner"
        (work / "prompt.txt").write_text("any text: the fake server tokenizes it as it is told")
        SENTINEL_HASH[0] = tree_hash(sentinel)
        c = Case(work, sentinel)
        m = model(work / "fake.gguf")
        with FakeServer(slots, m) as srv:
            names(c, srv, slots, store)
            entries(c, srv, slots, store)
            server_lies(c, srv, slots, store)
            long_prompts(c, srv, slots, store)
            store_faults(c, srv, slots, store)
            race(c, srv, slots, work / "race")
            temps(c, store)
            full_store(c, srv, slots, work)
            broken_chain(c, srv, slots, work / "broken")
        s3_names(c)
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
