"""tq slot with a server's context checkpoints (issue 46), against the real llama-server with
Gemma 3 270M (default flags).

A TurboQuant+ fork build writes its context checkpoints beside a saved slot file as
FILE.ckpt (fork PR #206: "PKCL", version 1, then per checkpoint n_tokens, pos_min, pos_max,
the sizes and the two partial states).  This llama-server does not, so a proxy in front of it
does what the fork does: on a save it writes the sidecar beside the slot file, with partial
states that llama.cpp itself made (llama-cpp-python, llama_state_seq_get_data_ext with
LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY: the sliding-window cache at 400 and 600 tokens of the
document), and on a restore it notes the sidecar it finds.
- save: the sidecar is kept with the snapshot (ckpt/NAME, its counts among the restore
  points; each partial state coded as a state is, with the default preset: under half the
  sidecar), and neither the slot file nor the sidecar is left in --slot-dir;
- restore of a prompt that shares 650 of the document's 1,100 tokens: the nearest checkpoint
  (600) is the restore point: the server processes the tokens after it + 1 and continues as a
  fresh prefill does (mean KL over 8 teacher-forced steps of the fresh prefill's tokens), and the sidecar written back holds the checkpoints at or below 600;
- a corrupt sidecar is left out with one warning; the snapshot is saved.
Every server is stopped at the end, also on failure."""
import ctypes
import http.server
import json
import struct
import subprocess
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FAILED, ROOT, TQ, fail, gemma, ok  # noqa: E402
from _server import Server, forced_kl, forced_tops, server_binary, servers_stopped  # noqa: E402

TEXT = "\n\n".join(p.read_text() for p in sorted((ROOT / "tests" / "oracle" / "prompts").glob("*.txt")))
DOC_TOKENS = 1100
CHECKPOINTS = (400, 600)
STEPS = 8


def partial_states(model, doc):
    """(n_tokens, pos_min, pos_max, bytes) of llama.cpp's partial state after each checkpoint's
    count of the document, as the fork's server takes them."""
    import llama_cpp
    from _llama_util import open_llm
    llm = open_llm(model, n_ctx=4096)
    ctx = llm._ctx.ctx
    mem = llama_cpp.llama_get_memory(ctx)
    out = []
    done = 0
    for c in CHECKPOINTS:
        llm.eval(doc[done:c])
        done = c
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
        size = llama_cpp.llama_state_seq_get_size_ext(ctx, 0, flags)
        buf = (ctypes.c_uint8 * size)()
        got = llama_cpp.llama_state_seq_get_data_ext(ctx, buf, size, 0, flags)
        assert got == size, "the partial state was not written whole"
        out.append((c, llama_cpp.llama_memory_seq_pos_min(mem, 0),
                    llama_cpp.llama_memory_seq_pos_max(mem, 0), bytes(buf)))
    del llm
    return out


def sidecar(states):
    """The fork's sidecar: u32 magic "PKCL", u32 version 1, u32 count, then per checkpoint
    i64 n_tokens, i32 pos_min, i32 pos_max, u64 n_tgt, u64 n_dft, the blobs."""
    b = struct.pack("<III", 0x4C434B50, 1, len(states))
    for n, lo, hi, blob in states:
        b += struct.pack("<qiiQQ", n, lo, hi, len(blob), 0) + blob
    return b


class ForkLike:
    """A proxy in front of llama-server that writes FILE.ckpt beside a saved slot file (the
    bytes in self.side) and notes the sidecar beside a slot file it is asked to restore."""

    def __init__(self, port, slot_dir):
        self.target = f"http://127.0.0.1:{port}"
        self.slot_dir = Path(slot_dir)
        self.side = None
        self.seen = None  # the sidecar found beside the last restored slot file
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def forward(self, body):
                req = urllib.request.Request(proxy.target + self.path, data=body,
                                             method=self.command,
                                             headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=120) as r:
                        code, data = r.status, r.read()
                except urllib.error.HTTPError as e:
                    code, data = e.code, e.read()
                return code, data

            def do_GET(self):
                self.answer(*self.forward(None))

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                name = json.loads(body or b"{}").get("filename", "")
                if "action=restore" in self.path:
                    side = proxy.slot_dir / (name + ".ckpt")
                    proxy.seen = side.read_bytes() if side.exists() else b""
                code, data = self.forward(body)
                if "action=save" in self.path and code == 200 and proxy.side is not None:
                    (proxy.slot_dir / (name + ".ckpt")).write_bytes(proxy.side)
                self.answer(code, data)

            def answer(self, code, data):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def slot(*args):
    p = subprocess.run([TQ, "slot", *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stderr.strip()


def counts_of(side):
    """The checkpoint counts of a sidecar."""
    n = struct.unpack_from("<I", side, 8)[0]
    at, out = 12, []
    for _ in range(n):
        t, _lo, _hi, tgt, dft = struct.unpack_from("<qiiQQ", side, at)
        out.append(t)
        at += 32 + tgt + dft
    return out


def main():
    binary = server_binary()
    model = gemma()
    with tempfile.TemporaryDirectory() as td:
        work = Path(td)
        a_dir, b_dir, c_dir = work / "a", work / "b", work / "c"
        for d in (a_dir, b_dir, c_dir):
            d.mkdir()
        with Server(binary, model, a_dir) as a, Server(binary, model, b_dir) as b, \
                Server(binary, model, c_dir) as c:
            toks = a.tokenize(TEXT)
            doc = a.tokenize(a.post("/detokenize", {"tokens": toks[1:DOC_TOKENS]})["content"])
            pa, pb = ForkLike(a.port, a_dir), ForkLike(b.port, b_dir)
            try:
                pa.side = sidecar(partial_states(model, doc))
                run(a, b, c, pa, pb, a_dir, b_dir, work, model, doc)
            finally:
                pa.close()
                pb.close()
            if any(s.proc.poll() is not None for s in (a, b, c)):
                fail("the_server_never_crashes", a.log_tail())
        servers_stopped()
    sys.exit(1 if FAILED else 0)


def run(a, b, c, pa, pb, a_dir, b_dir, work, model, doc):
    store = work / "store"
    a.post("/completion", {"prompt": doc, "n_predict": 0, "id_slot": 0, "cache_prompt": True})
    name = "save_keeps_the_servers_checkpoints_and_leaves_no_raw_file"
    rc, err = slot("save", "--server", pa.url, "--slot-dir", a_dir, "--store", store,
                   "--model", model)
    points = next(store.glob("points/*"), None)
    kept = next(store.glob("ckpt/*"), None)
    left = [p.name for p in a_dir.iterdir()]
    text = points.read_text() if points else ""
    if rc or "checkpoints" not in err or not kept or left or \
            any(f"checkpoint {n}" not in text for n in CHECKPOINTS):
        return fail(name, f"exit {rc} ({err}); points {text!r}; stored {kept}; left {left}")
    ok(name)
    # coded as states are (the default preset): smaller than the sidecar's raw f16 rows
    name = "stored_checkpoints_are_coded_smaller_than_the_sidecar"
    print(f"  {name}: {kept.stat().st_size} bytes for a sidecar of {len(pa.side)}")
    if kept.stat().st_size > 0.5 * len(pa.side):
        return fail(name, f"{kept.stat().st_size} bytes for a sidecar of {len(pa.side)}")
    ok(name)

    name = "restore_below_the_end_uses_the_nearest_checkpoint"
    shared = 650
    prompt = a.post("/detokenize", {"tokens": doc[1:shared]})["content"]
    pf = work / "prompt.txt"
    pf.write_text(prompt)
    pt = b.tokenize(prompt)
    c.slot("erase")
    ref = c.complete(pt, STEPS)
    b.slot("erase")
    rc, err = slot("restore", "--server", pb.url, "--slot-dir", b_dir, "--store", store,
                   "--model", model, "--prompt", pf)
    got = b.complete(pt, 1)
    # then teacher-forced along the fresh prefill's tokens: one token a step
    tops = forced_tops(b, pt, [tok for tok, _ in ref["steps"]])
    kl = forced_kl([top for _, top in ref["steps"]], tops)
    back = counts_of(pb.seen) if pb.seen else []
    left = [p.name for p in b_dir.iterdir()]
    print(f"  {name}: processed {got['processed']} of {len(pt)}, mean KL over {STEPS} "
          f"teacher-forced steps {kl:.1e}; checkpoints written back {back}")
    if rc or "600 of the prompt" not in err or got["processed"] > len(pt) - 600 + 1 or \
            back != list(CHECKPOINTS) or left or kl > 0.05:
        return fail(name, f"exit {rc} ({err}); processed {got['processed']} of {len(pt)}; "
                          f"KL {kl:.2e}; written back {back}; left {left}")
    ok(name)

    name = "a_corrupt_sidecar_is_left_out_with_a_warning"
    pa.side = b"PKCL" + b"\x01\x00\x00\x00" + b"\x09\x00\x00\x00"  # nine checkpoints, no bytes
    more = doc + doc[1:40]
    a.post("/completion", {"prompt": more, "n_predict": 0, "id_slot": 0, "cache_prompt": True})
    rc, err = slot("save", "--server", pa.url, "--slot-dir", a_dir, "--store", store,
                   "--model", model)
    left = [p.name for p in a_dir.iterdir()]
    if rc or "warning" not in err or "sidecar" not in err or left or \
            len(list(store.glob("ckpt/*"))) != 1:
        return fail(name, f"exit {rc} ({err}); left {left}")
    ok(name)


if __name__ == "__main__":
    main()
