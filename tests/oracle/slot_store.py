"""tq slot (issue 39), against the real llama-server (tests/setup_server.sh) with SmolLM2-135M:
slots saved to a store in a temporary directory and restored into another server.

- lossless: `tq slot save --preset lossless`, then `tq slot restore --prompt` into a fresh
  server continues as the server's own slot file does (tokens and probabilities), with one
  prompt token processed again;
- the default preset restores from the stored cells (one prompt token processed again);
- prefix: a 2,048-token document is saved; the document and 100 new tokens restore its cells
  into another server, which then processes at most 101 prompt tokens;
- chain: ten sessions that share the document and differ after it store the document's cells
  once: each is appended to the document's snapshot, and the store holds less than 1.5 times
  one session's snapshot plus the ten tails; the document's prompt restores from its own
  snapshot, not a newer link on it (the same point, cheaper to decode);
- gc: --max-size holds, and an appended snapshot's base stays while it does;
- pool: two servers and one store, each saving five sessions and restoring the other's latest
  in parallel: every restore continues as the saving server did, and no save is lost;
- faults: the server unreachable, a server without --slot-save-path (HTTP 501), a --slot-dir
  that is not the server's, a snapshot of another model, no such name, an unwritable store:
  one line, exit 1, the store as it was; a corrupt snapshot is skipped with a warning and the
  next-best prefix restored (on radosgw too, where only the decode finds it).
Every server is stopped at the end, also on failure."""
import json
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FAILED, ROOT, TQ, fail, ok, smollm2  # noqa: E402
from _s3 import Store  # noqa: E402
from _server import Server, left_behind, server_binary  # noqa: E402

TEXT = "\n\n".join(p.read_text() for p in sorted((ROOT / "tests" / "oracle" / "prompts").glob("*.txt")))
STEPS = 16
ENV = None  # the environment tq runs in: the object store's credentials for a store there


def slot(*args):
    """tq slot ARGS: (exit status, stderr)."""
    p = subprocess.run([TQ, "slot", *map(str, args)], capture_output=True, text=True, env=ENV)
    return p.returncode, p.stderr.strip()


def stored(store):
    """tq slot ls --json STORE: the stored snapshots."""
    p = subprocess.run([TQ, "slot", "ls", str(store), "--json"], capture_output=True, text=True,
                       env=ENV)
    return json.loads(p.stdout or "[]")


def texts(s):
    """The document (about 2,048 tokens of our prompts' text) and ten tails of a few dozen
    tokens each, as texts whose tokens the server makes the same every time."""
    toks = s.tokenize(TEXT)
    # ends with a full stop; a continuation starts with a space, which begins a token of its own
    # (a paragraph break at the end would be one token alone and two before a word)
    doc = s.post("/detokenize", {"tokens": toks[1:2048]})["content"].rstrip() + "."
    tails = []
    for i in range(10):
        piece = s.post("/detokenize", {"tokens": toks[2100 + 60 * i:2100 + 60 * i + 60]})["content"]
        tails.append(f"{doc} Question {i}: {piece.strip()}")
    d = s.tokenize(doc)
    for t in tails:
        assert s.tokenize(t)[:len(d)] == d, "the document's tokens are not a prefix of a session's"
    return doc, tails


def store_bytes(store):
    return sum(e["bytes"] for e in stored(store))


def listing(store):
    return sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file())


def chains_whole(store):
    """Every appended snapshot's base is stored ('' when so, else the first missing one)."""
    names = {e["name"] + ".tqkv" for e in stored(store)}
    for e in stored(store):
        if e["base"] and e["base"] not in names:
            return f"{e['name']} needs {e['base']}"
    return ""


def gc(chain, doc_bytes, suffix):
    name = "gc_holds_max_size_and_keeps_chains_whole" + suffix
    sizes = [e["bytes"] for e in stored(chain)]
    tail = max(b for b in sizes if b < doc_bytes)
    limit = doc_bytes + 3 * tail
    rc, err = slot("gc", chain, "--max-size", limit)
    after = store_bytes(chain)
    left = len(stored(chain))
    broken = chains_whole(chain)
    if rc or after > limit or left != 4 or broken:
        return fail(name, f"exit {rc} ({err}): {after} bytes for at most {limit}, {left} left "
                          f"(the document and 3 tails), {broken}")
    rc, err = slot("gc", chain, "--max-size", "1")  # the tails first, then their base
    if rc or stored(chain):
        return fail(name, f"emptying: exit {rc} ({err}): {stored(chain)[:2]}")
    ok(name)


def faults(a, b, a_dir, b_dir, work, model, docfile, tails):
    """Each error one line and exit 1, the store as it was (and no raw file left)."""
    name = "faults_are_one_line_and_leave_the_store_as_it_was"
    store = work / "faulty"
    server_a = f"http://127.0.0.1:{a.port}"
    server_b = f"http://127.0.0.1:{b.port}"
    a.prefill(a.tokenize(tails[1]))
    slot("save", "--server", server_a, "--slot-dir", a_dir, "--store", store, "--model", model,
         "--name", "session")
    before = listing(store)
    other = work / "other.gguf"
    subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'tests/oracle');"
                    "from _models import make_model; make_model(sys.argv[1], None, head_dim=64)",
                    other], cwd=ROOT, check=True, capture_output=True)
    cases = [
        (["save", "--server", "http://127.0.0.1:9", "--slot-dir", a_dir, "--store", store,
          "--model", model], "did not answer"),
        (["restore", "--server", "http://127.0.0.1:9", "--slot-dir", b_dir, "--store", store,
          "--prompt", docfile], "did not answer"),
        (["save", "--server", server_a, "--slot-dir", work, "--store", store, "--model", model],
         "give its --slot-save-path as --slot-dir"),
        (["restore", "--server", server_b, "--slot-dir", b_dir, "--store", store,
          "--name", "session", "--model", other], "a snapshot of another model"),
        (["restore", "--server", server_b, "--slot-dir", b_dir, "--store", store,
          "--name", "nobody", "--model", model], "no snapshot named"),
        (["save", "--server", server_a, "--slot-dir", a_dir, "--store", "/proc/tq-store",
          "--model", model], "not a directory tq can use"),
    ]
    with Server(server_binary(), model, work / "nowhere", save_path=False) as c:
        cases.append((["save", "--server", f"http://127.0.0.1:{c.port}", "--slot-dir", a_dir,
                       "--store", store, "--model", model], "HTTP 501"))
        results = []
        for args, needle in cases:
            results.append((args, needle, slot(*args)))
            if "--slot-save-path" in needle:  # the server saved into its own folder
                for p in a_dir.glob("tq-save-*"):
                    p.unlink()
            results[-1] += ([p.name for p in list(a_dir.iterdir()) + list(b_dir.iterdir())
                             if p.name.startswith("tq-")],)
    for args, needle, (rc, err), raw in results:
        if rc != 1 or len(err.splitlines()) != 1 or needle not in err or \
                listing(store) != before or raw:
            return fail(name, f"{args[0]} {args[-1]}: exit {rc}, '{err}', store changed "
                              f"{listing(store) != before}, raw files {raw}")
    # a corrupt snapshot is skipped with a warning: the next-best prefix (the document) is used
    a.prefill(a.tokenize(docfile.read_text()))  # the document: the next-best prefix
    slot("save", "--server", server_a, "--slot-dir", a_dir, "--store", store, "--model", model)
    biggest = max(stored(store), key=lambda e: e["tokens"])
    p = store / "snap" / f"{biggest['name']}.tqkv"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 1
    p.write_bytes(bytes(data))
    longer = work / "session.txt"
    longer.write_text(tails[1])
    b.slot("erase")
    rc, err = slot("restore", "--server", server_b, "--slot-dir", b_dir, "--store", store,
                   "--prompt", longer, "--model", model)
    if rc or "could not be read" not in err or "restored from" not in err:
        return fail(name, f"a corrupt snapshot: exit {rc}: {err}")
    ok(name)


def pool(a, b, a_dir, b_dir, store, model, tails, suffix):
    """Two servers, one store: each saves five sessions (lossless) and restores the other's
    latest after each save (20 operations), in parallel; every restore continues as the saving
    server did, and no save is lost."""
    name = "two_servers_one_store_lose_nothing" + suffix
    work = a_dir.parent
    saved = []  # (server index, prompt file, tokens, reference steps)
    lock = threading.Lock()
    errors = []

    def worker(x, s, d, sessions):
        server = f"http://127.0.0.1:{s.port}"
        for i, text in enumerate(sessions):
            toks = s.tokenize(text)
            prompt = work / f"pool-{x}-{i}.txt"
            prompt.write_text(text)
            s.prefill(toks)
            rc, err = slot("save", "--server", server, "--slot-dir", d, "--store", store,
                           "--preset", "lossless", "--model", model)
            ref = s.complete(toks, 4)
            if rc:
                errors.append(f"server {x} save {i}: {err}")
                continue
            with lock:
                saved.append((x, prompt, toks, ref["steps"]))
                # the other server's latest save, else (at the start) this one's own
                theirs = [e for e in saved if e[0] != x] or [e for e in saved if e[0] == x]
            _, p, t, want = theirs[-1]
            s.slot("erase")
            rc, err = slot("restore", "--server", server, "--slot-dir", d, "--store", store,
                           "--prompt", p, "--model", model)
            got = s.complete(t, 4) if not rc else None
            if rc or f"{len(t)} of the prompt's {len(t)} tokens" not in err or \
                    got["processed"] != 1 or got["steps"] != want:
                errors.append(f"server {x} restore {i}: exit {rc} ({err}): processed "
                              f"{got and got['processed']}, same {got and got['steps'] == want}")

    threads = [threading.Thread(target=worker, args=(0, a, a_dir, tails[0:5])),
               threading.Thread(target=worker, args=(1, b, b_dir, tails[5:10]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    n = len(stored(store))
    if errors or n != 10:
        return fail(name, f"{n} of 10 saves stored; {'; '.join(errors[:3])}")
    ok(name)


def behaviours(a, b, a_dir, b_dir, model, docfile, doc_toks, tails, ref, where, suffix):
    """Every store behaviour, with the stores where(name) names (a directory or an object
    prefix).  Slot 0 of server a holds the document at the start."""
    work = a_dir.parent
    a.hold(doc_toks, "ref.bin")  # the document's cells as the reference has them
    name = "lossless_save_and_restore_continue_identically" + suffix
    lossless = where("lossless")
    rc, err = slot("save", "--server", f"http://127.0.0.1:{a.port}", "--slot-dir", a_dir,
                   "--store", lossless, "--preset", "lossless", "--model", model)
    b.slot("erase")
    rc2, err2 = slot("restore", "--server", f"http://127.0.0.1:{b.port}", "--slot-dir",
                     b_dir, "--store", lossless, "--prompt", docfile, "--model", model)
    got = b.complete(doc_toks, STEPS) if not rc and not rc2 else None
    left = sorted(p.name for p in list(a_dir.iterdir()) + list(b_dir.iterdir())
                  if p.name.startswith("tq-"))
    if rc or rc2:
        fail(name, f"save: {err} / restore: {err2}")
    elif got["steps"] != ref["steps"] or got["processed"] != 1 or left:
        fail(name, f"processed {got['processed']}, same steps {got['steps'] == ref['steps']}"
                   f", raw files left {left}")
    else:
        ok(name)

    name = "the_default_preset_restores_the_stored_cells" + suffix
    store = where("store")
    rc, err = slot("save", "--server", f"http://127.0.0.1:{a.port}", "--slot-dir", a_dir,
                   "--store", store, "--model", model)
    b.slot("erase")
    rc2, err2 = slot("restore", "--server", f"http://127.0.0.1:{b.port}", "--slot-dir",
                     b_dir, "--store", store, "--prompt", docfile, "--model", model)
    got = b.complete(doc_toks, STEPS) if not rc and not rc2 else None
    if rc or rc2 or got["processed"] != 1 or not got["content"].strip():
        fail(name, f"save: {err} / restore: {err2} / {got and got['processed']}")
    else:
        ok(name)

    name = "a_document_and_100_new_tokens_process_at_most_101" + suffix
    longer = work / "longer.txt"
    longer.write_text(tails[0])
    long_toks = b.tokenize(tails[0])
    b.slot("erase")
    rc, err = slot("restore", "--server", f"http://127.0.0.1:{b.port}", "--slot-dir",
                   b_dir, "--store", store, "--prompt", longer, "--model", model)
    got = b.complete(long_toks, 1) if not rc else None
    new = len(long_toks) - len(doc_toks)
    if rc or new > 100 or got["processed"] > new + 1:
        fail(name, f"{err}: {new} new tokens, the server processed "
                   f"{got and got['processed']}")
    else:
        print(f"  {len(long_toks)} prompt tokens, {new} new: the server processed "
              f"{got['processed']}", flush=True)
        ok(name)

    name = "ten_sessions_on_one_document_store_it_once" + suffix
    chain = where("chain")
    rc, err = slot("save", "--server", f"http://127.0.0.1:{a.port}", "--slot-dir", a_dir,
                   "--store", chain, "--model", model)
    doc_bytes = store_bytes(chain)
    said = []
    for t in tails:
        a.prefill(a.tokenize(t))
        rc_i, err_i = slot("save", "--server", f"http://127.0.0.1:{a.port}", "--slot-dir",
                           a_dir, "--store", chain, "--model", model)
        rc |= rc_i
        said.append(err_i)
    one = where("one")
    slot("save", "--server", f"http://127.0.0.1:{a.port}", "--slot-dir", a_dir, "--store",
         one, "--model", model)
    session = store_bytes(one)
    total = store_bytes(chain)
    tail_bytes = total - doc_bytes
    appended = sum("appended to" in s for s in said)
    print(f"  document {doc_bytes / 1e6:.2f} MB, one session alone {session / 1e6:.2f} MB, "
          f"the store after ten {total / 1e6:.2f} MB ({appended} appended)", flush=True)
    if rc or appended != 10 or total >= 1.5 * session + tail_bytes or \
            tail_bytes > 10 * 0.25 * session:
        fail(name, f"exit {rc}, {appended} of 10 appended, store {total} bytes, one "
                   f"session {session}, tails {tail_bytes}: {said[-1]}")
    else:
        ok(name)

    # the document's own snapshot, not a newer session's link on it: the same point, but the
    # link's base would be read whole and the link cut
    name = "a_prompt_restores_from_the_snapshot_cheapest_to_decode" + suffix
    stored_as = re.search(r"stored as (\S+)", err)
    b.slot("erase")
    rc, out = slot("restore", "--server", f"http://127.0.0.1:{b.port}", "--slot-dir", b_dir,
                   "--store", chain, "--prompt", docfile, "--model", model)
    restored = re.search(r"restored from (\S+)", out)
    want = stored_as and stored_as.group(1)
    if rc or not restored or restored.group(1) != want:
        fail(name, f"exit {rc}: restored from {restored and restored.group(1)}, the "
                   f"document's snapshot {want}: {out}")
    else:
        ok(name)
    gc(chain, doc_bytes, suffix)
    pool(a, b, a_dir, b_dir, where("pool"), model, tails, suffix)


def corrupt_on_s3(s3, a, b, a_dir, b_dir, model, docfile, doc_toks, tails):
    """A stored object whose chunks are corrupt (its index reads fine) fails to decode: the
    restore says so and takes the next-best prefix."""
    name = "a_corrupt_object_gives_way_to_the_next_best_prefix_on_s3"
    store = "s3://slots/corrupt"
    server_a = f"http://127.0.0.1:{a.port}"
    a.prefill(doc_toks)
    slot("save", "--server", server_a, "--slot-dir", a_dir, "--store", store, "--model", model)
    a.prefill(a.tokenize(tails[2]))
    slot("save", "--server", server_a, "--slot-dir", a_dir, "--store", store, "--model", model)
    tail = max(stored(store), key=lambda e: e["tokens"])
    key = f"slots/corrupt/snap/{tail['name']}.tqkv"
    data = bytearray(s3.object_bytes(key))
    data[len(data) - 4096] ^= 1  # a chunk's byte, past the index's reach
    s3.put_bytes(key, bytes(data))
    prompt = a_dir.parent / "corrupt.txt"
    prompt.write_text(tails[2])
    b.slot("erase")
    rc, err = slot("restore", "--server", f"http://127.0.0.1:{b.port}", "--slot-dir", b_dir,
                   "--store", store, "--prompt", prompt, "--model", model)
    if rc or "next-best prefix" not in err or f"{len(doc_toks)} of the prompt's" not in err:
        return fail(name, f"exit {rc}: {err}")
    ok(name)


def main():
    global ENV
    binary = server_binary()
    model = smollm2()
    with tempfile.TemporaryDirectory() as td:
        work = Path(td)
        a_dir, b_dir = work / "a", work / "b"
        a_dir.mkdir()
        b_dir.mkdir()
        with Server(binary, model, a_dir) as a, Server(binary, model, b_dir) as b:
            doc, tails = texts(a)
            docfile = work / "doc.txt"
            docfile.write_text(doc)
            doc_toks = a.tokenize(doc)
            a.hold(doc_toks, "ref.bin")  # kept: each pass of behaviours() starts from it
            (b_dir / "ref.bin").write_bytes((a_dir / "ref.bin").read_bytes())
            ref = b.resume("ref.bin", doc_toks, STEPS)
            behaviours(a, b, a_dir, b_dir, model, docfile, doc_toks, tails, ref,
                       lambda n: work / n, "")
            faults(a, b, a_dir, b_dir, work, model, docfile, tails)
            with Store() as s3:  # the same on radosgw (tests/setup_s3.sh)
                ENV = s3.tq_env()
                s3.bucket("slots")
                behaviours(a, b, a_dir, b_dir, model, docfile, doc_toks, tails, ref,
                           lambda n: f"s3://slots/{n}", "_on_s3")
                corrupt_on_s3(s3, a, b, a_dir, b_dir, model, docfile, doc_toks, tails)
                name = "a_store_on_s3_with_bad_credentials_is_one_line"
                ENV = s3.tq_env(AWS_SECRET_ACCESS_KEY="wrong")
                rc, err = slot("save", "--server", f"http://127.0.0.1:{a.port}", "--slot-dir",
                               a_dir, "--store", "s3://slots/store", "--model", model)
                ENV = s3.tq_env()
                if rc != 1 or len(err.splitlines()) != 1 or "access denied" not in err:
                    fail(name, f"exit {rc}: {err}")
                else:
                    ok(name)
        left = left_behind()
        if left:
            fail("servers_are_stopped", ", ".join(left))
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
