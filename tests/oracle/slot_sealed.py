"""Sealed snapshots and stores (issue 56, its first step): `--key-file` on encode-kvdump,
decode-kvdump, inspect and tq slot, against the real llama-server with SmolLM2-135M and Gemma 3
270M, a store in a directory and on radosgw (tests/setup_s3.sh).

- a lossless save sealed with a key restores into another server whose own save of the slot is
  then the raw save byte for byte;
- nothing in a sealed store is plain: every entry begins with the seal's magic, and the prompt's
  tokens appear in none of them;
- a restore without the key, or with another, is a miss (exit 3, one line) and loads nothing;
- names are keyed: the same prompt stored with a key and without has other names, and two keys
  in one store keep their entries apart (each lists and collects its own alone);
- a plain snapshot planted in a sealed store under the stored name, or a sealed one with a byte
  flipped, is not restored (a miss, its warning one line);
- `tq slot proxy --key-file`: a conversation through the openai client, the server restarted
  before every turn, restores each later turn from the sealed store;
- decode-kvdump of a sealed slot file: with its key the same state as the plain snapshot
  decodes to; without it or with another, one line, exit 1 and no output file.
Every server is stopped at the end, also on failure."""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FAILED, ROOT, TQ, fail, gemma, ok, smollm2  # noqa: E402
from _proxy import Proxy  # noqa: E402
from _s3 import Store  # noqa: E402
from _server import Server, server_binary, servers_stopped  # noqa: E402

TEXT = "\n\n".join(p.read_text() for p in sorted((ROOT / "tests" / "oracle" / "prompts").glob("*.txt")))
DOC_TOKENS = 1200
ENV = dict(os.environ)


def tq(*args, env=None):
    """tq ARGS: (exit status, stderr)."""
    p = subprocess.run([TQ, *map(str, args)], capture_output=True, text=True, env=env or ENV)
    return p.returncode, p.stderr.strip()


def key(path, seed):
    path.write_bytes(bytes((seed * 37 + i * 11) % 256 for i in range(32)))
    path.chmod(0o600)
    return path


def entries(store, s3):
    """(name, bytes) of every entry of a store (a directory, or s3://bucket/prefix)."""
    if isinstance(store, Path):
        return [(str(p.relative_to(store)), p.read_bytes()) for p in sorted(store.rglob("*"))
                if p.is_file()]
    bucket, prefix = store[len("s3://"):].split("/", 1)
    return [(k, s3.object_bytes(f"{bucket}/{k}")) for k in s3.keys(bucket, prefix + "/")]


def replace_entry(store, s3, name, data):
    if isinstance(store, Path):
        (store / name).write_bytes(data)
    else:
        bucket = store[len("s3://"):].split("/", 1)[0]
        s3.put_bytes(f"{bucket}/{name}", data)


def listed(store, k):
    """tq slot ls --json STORE with key k: the names it lists."""
    p = subprocess.run([TQ, "slot", "ls", str(store), "--json", "--key-file", str(k)],
                       capture_output=True, text=True, env=ENV)
    return sorted(e["name"] for e in json.loads(p.stdout or "[]"))


def snap_entry(store, s3):
    return next((n, b) for n, b in entries(store, s3) if "snap/" in n and n.endswith(".tqkv"))


def store_behaviours(a, b, a_dir, b_dir, model, docfile, doc_toks, where, s3, k1, k2, suffix):
    server_a = f"http://127.0.0.1:{a.port}"
    server_b = f"http://127.0.0.1:{b.port}"
    a.hold(doc_toks, "raw.bin")  # the second store's: restored
    raw = (a_dir / "raw.bin").read_bytes()

    name = "a_sealed_lossless_restore_saves_as_the_raw_save" + suffix
    store = where("sealed")
    rc, err = tq("slot", "save", "--server", server_a, "--slot-dir", a_dir, "--store", store,
                 "--preset", "lossless", "--model", model, "--key-file", k1)
    b.slot("erase")
    rc2, err2 = tq("slot", "restore", "--server", server_b, "--slot-dir", b_dir, "--store",
                   store, "--prompt", docfile, "--model", model, "--key-file", k1)
    again = None
    if not rc and not rc2:
        b.slot("save", "again.bin")
        again = (b_dir / "again.bin").read_bytes()
    if rc or rc2 or again != raw:
        fail(name, f"save: {err} / restore: {err2} / the re-save is "
                   f"{'the same' if again == raw else 'another'} ({len(again or b'')} bytes "
                   f"against {len(raw)})")
    else:
        ok(name)

    name = "nothing_in_a_sealed_store_is_plain" + suffix
    found = entries(store, s3)
    plain = [n for n, data in found if not data.startswith(b"TQKS")]
    needle = b"".join(t.to_bytes(4, "little") for t in doc_toks[100:108])
    leaks = [n for n, data in found if needle in data]
    if not found or plain or leaks:
        fail(name, f"{len(found)} entries; plain: {plain[:3]}; the tokens in: {leaks[:3]}")
    else:
        ok(name)

    name = "a_restore_without_the_key_or_with_another_is_a_miss" + suffix
    said = []
    for keys in ([], ["--key-file", k2]):
        b.slot("erase")
        rc, err = tq("slot", "restore", "--server", server_b, "--slot-dir", b_dir, "--store",
                     store, "--prompt", docfile, "--model", model, *keys)
        said.append((rc, err))
    if any(rc != 3 or len(err.splitlines()) > 2 for rc, err in said):
        fail(name, f"{said}")
    else:
        ok(name)

    name = "two_keys_in_one_store_keep_their_entries_apart" + suffix
    rc, err = tq("slot", "save", "--server", server_a, "--slot-dir", a_dir, "--store", store,
                 "--preset", "lossless", "--model", model, "--key-file", k2)
    ones, twos = listed(store, k1), listed(store, k2)
    rc_gc, err_gc = tq("slot", "gc", store, "--max-size", 1, "--key-file", k2)
    ones_after, twos_after = listed(store, k1), listed(store, k2)
    if rc or rc_gc or len(ones) != 1 or len(twos) != 1 or ones == twos or \
            ones_after != ones or twos_after:
        fail(name, f"save {err}, gc {err_gc}: key 1 lists {ones} then {ones_after}, key 2 "
                   f"{twos} then {twos_after}")
    else:
        ok(name)

    name = "a_planted_or_damaged_snapshot_in_a_sealed_store_is_not_restored" + suffix
    plain_store = where("plain")
    tq("slot", "save", "--server", server_a, "--slot-dir", a_dir, "--store", plain_store,
       "--preset", "lossless", "--model", model)
    sealed_name, sealed_bytes = snap_entry(store, s3)
    plain_name, plain_bytes = snap_entry(plain_store, s3)
    if plain_name.rsplit("/", 1)[1] == sealed_name.rsplit("/", 1)[1]:
        fail("a_sealed_store_names_a_prompt_otherwise" + suffix, f"both {plain_name}")
    else:
        ok("a_sealed_store_names_a_prompt_otherwise" + suffix)
    said = []
    damaged = bytearray(sealed_bytes)
    damaged[len(damaged) // 2] ^= 4
    for data in (plain_bytes, bytes(damaged)):
        replace_entry(store, s3, sealed_name, data)
        b.slot("erase")
        rc, err = tq("slot", "restore", "--server", server_b, "--slot-dir", b_dir, "--store",
                     store, "--prompt", docfile, "--model", model, "--key-file", k1)
        said.append((rc, err))
    replace_entry(store, s3, sealed_name, sealed_bytes)
    if any(rc != 3 for rc, _ in said):
        fail(name, f"{said}")
    else:
        ok(name)
    return raw


def cli_behaviours(work, raw, model, k1, k2, suffix):
    name = "a_sealed_snapshot_decodes_with_its_key_and_nothing_without" + suffix
    state = work / "state.bin"
    state.write_bytes(raw)
    sealed, plain = work / "s.tqkv", work / "p.tqkv"
    rc1, e1 = tq("encode-kvdump", state, "-q", "-o", sealed, "--model", model, "--key-file", k1)
    rc2, e2 = tq("encode-kvdump", state, "-q", "-o", plain, "--model", model)
    outs = []
    for keys in (["--key-file", k1], [], ["--key-file", k2]):
        out = work / f"out{len(outs)}.bin"
        rc, err = tq("decode-kvdump", sealed, "-q", "-o", out, *keys)
        outs.append((rc, err, out.read_bytes() if out.exists() else None))
    ref = work / "ref.bin"
    tq("decode-kvdump", plain, "-q", "-o", ref)
    good = outs[0][0] == 0 and ref.exists() and outs[0][2] == ref.read_bytes()
    refused = all(rc == 1 and len(err.splitlines()) == 1 and data is None
                  for rc, err, data in outs[1:])
    if rc1 or rc2 or not good or not refused or sealed.read_bytes()[:4] != b"TQKS":
        fail(name, f"encode {e1} {e2}; with the key: same {good}; without/another: "
                   f"{[(rc, err) for rc, err, _ in outs[1:]]}")
    else:
        ok(name)


def proxy_behaviours(a, store, doc_text, k1, suffix):
    """Three turns through a proxy with a key, the server restarted before each."""
    from openai import OpenAI

    name = "a_proxy_with_a_key_restores_every_turn_from_its_sealed_store" + suffix
    with Proxy(a, store, "--key-file", k1, env=ENV) as p:
        client = OpenAI(base_url=p.url + "/v1", api_key="none", max_retries=0, timeout=600)
        messages = [{"role": "system", "content": doc_text}]
        turns = []
        for i, q in enumerate(["Say what this is about.", "And in one word?", "Thanks."]):
            messages.append({"role": "user", "content": q})
            if i:
                a.restart()
            r = client.chat.completions.create(model="m", messages=messages, max_tokens=8,
                                               temperature=0)
            p.wait_requests(i + 1)
            p.wait_idle()
            processed = (r.model_extra or {})["timings"]["prompt_n"]
            turns.append((r.usage.prompt_tokens, processed))
            messages.append({"role": "assistant", "content": r.choices[0].message.content or ""})
    restored = [n - prev_n + 8 >= done for (prev_n, _), (n, done) in zip(turns, turns[1:])]
    found = [f for f in Path(store).rglob("*") if f.is_file()]
    plain = [f.name for f in found if not f.read_bytes().startswith(b"TQKS")]
    if not all(restored) or not found or plain or p.exit_code:
        fail(name, f"(prompt, processed) by turn {turns}; plain entries {plain[:3]}; exit "
                   f"{p.exit_code}; {p.lines('note|warning|refused')[-3:]}")
    else:
        print(f"  (prompt tokens, processed) by turn: {turns}", flush=True)
        ok(name)


def run_model(binary, model, label, s3):
    global ENV
    with tempfile.TemporaryDirectory() as td:
        work = Path(td)
        a_dir, b_dir = work / "a", work / "b"
        a_dir.mkdir()
        b_dir.mkdir()
        k1, k2 = key(work / "k1", 1), key(work / "k2", 2)
        with Server(binary, model, a_dir) as a, Server(binary, model, b_dir) as b:
            doc_toks = a.tokenize(TEXT)[:DOC_TOKENS]
            docfile = work / "doc.txt"
            docfile.write_text(a.detokenized(doc_toks))
            doc_toks = a.tokenize(docfile.read_text())
            ENV = dict(os.environ)
            raw = store_behaviours(a, b, a_dir, b_dir, model, docfile, doc_toks,
                                   lambda n: work / n, None, k1, k2, f"_{label}")
            cli_behaviours(work, raw, model, k1, k2, f"_{label}")
            proxy_behaviours(a, work / "proxied", docfile.read_text(), k1, f"_{label}")
            ENV = s3.tq_env()
            s3.bucket(f"sealed-{label}")
            store_behaviours(a, b, a_dir, b_dir, model, docfile, doc_toks,
                             lambda n: f"s3://sealed-{label}/{n}", s3, k1, k2,
                             f"_{label}_on_s3")


def main():
    binary = server_binary()
    with Store() as s3:
        run_model(binary, smollm2(), "smollm2", s3)
        run_model(binary, gemma(), "gemma", s3)
    servers_stopped()
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
