"""A llama-server of our own for the tests that need a server to misbehave (not a test itself):
it answers /props, /tokenize and /slots the way llama-server does, from generated sequence
states, and misbehaves as a test asks (stalls, answers too much, answers numbers out of range,
text with terminal escapes).  Real behaviour is tested against the real llama-server
(slot_store.py, slot_windows.py); this one stands for a hostile or broken one.

Its states: a llama.cpp sequence file (LLAMA_STATE.md) of one dense cache, LAYERS layers of
f16 K and V rows of WIDTH values, each cell's rows a function of its position alone, so a
longer session extends a shorter one cell for cell, as a real one does."""
import http.server
import json
import struct
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import need  # noqa: E402

np = need("numpy")  # exit 77 (skip) without the oracles

LAYERS, HEADS_KV, HEAD = 2, 4, 8
WIDTH = HEADS_KV * HEAD


def tokens_of(n, salt=0):
    """A session's tokens: the first n of a fixed sequence (salt varies the tail after 256)."""
    return [(i * 7 + (salt if i >= 256 else 0)) % 500 + 1 for i in range(n)]


def state(tokens):
    """A sequence file (version 2) of these tokens: one stream, a cell a token."""
    n = len(tokens)
    b = struct.pack("<III", 0x67677371, 2, n) + struct.pack(f"<{n}i", *tokens)
    b += struct.pack("<II", 1, n)  # n_stream, cell_count
    for i in range(n):
        b += struct.pack("<iIi", i, 1, 0)  # pos, n_seq, seq id
    b += struct.pack("<II", 0, LAYERS)  # v_trans, n_layer
    pos = np.arange(n, dtype=np.float32)[:, None]
    ch = np.arange(WIDTH, dtype=np.float32)[None, :]
    for kv in range(2):
        for layer in range(LAYERS):
            rows = np.sin(pos * 0.37 + ch * 0.11 + layer + 3 * kv).astype(np.float16)
            b += struct.pack("<iQ", 1, WIDTH * 2) + rows.tobytes()
    return b


def model(path):
    """A GGUF whose K/V widths are the states' (the fingerprint and shapes tq checks)."""
    from _models import make_model
    make_model(path, None, head_dim=HEAD, n_head=8, n_head_kv=HEADS_KV, n_layer=LAYERS)
    return path


class FakeServer:
    """with FakeServer(slot_dir, model_path) as f: f.url; f.mode = "..."; f.tokens = [...].
    Modes: "ok"; "stall" (accept, never answer); "flood" (Content-Length 10 GiB, a few bytes,
    then nothing); "big_props" (an 8 MiB /props); "escape" (HTTP 500 whose message holds
    terminal escapes); "negative" (n_restored -5); "tokens_text" ({"tokens": "abc"});
    "token_2_40" (a token of 2^40); "n_saved_huge" (n_saved 1e400, after writing the file);
    "link_file" (the saved slot file a symlink to link_target).
    restored: the bytes of every slot file it was asked to restore."""

    def __init__(self, slot_dir, model_path):
        self.slot_dir = Path(slot_dir)
        self.model_path = str(model_path)
        self.mode = "ok"
        self.tokens = tokens_of(300)
        self.restored = []
        self.link_target = "/etc/passwd"
        self.slot_bytes = None  # what a save writes instead of state(tokens)
        self.build_info = None  # /props' build_info
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def answer(self, code, obj):
                data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def misbehave(self):
                if fake.mode == "stall":
                    time.sleep(3600)
                    return True
                if fake.mode == "flood":
                    self.send_response(200)
                    self.send_header("Content-Length", str(10 << 30))
                    self.end_headers()
                    self.wfile.write(b"{\"a\": ")
                    self.wfile.flush()
                    time.sleep(3600)
                    return True
                if fake.mode == "escape":
                    self.answer(500, {"error": {"code": 500, "message": "bad \x1b[31mred\x1b[0m "
                                                                        "\x07 bell"}})
                    return True
                return False

            def do_GET(self):
                if self.misbehave():
                    return
                if self.path.startswith("/props"):
                    props = {"model_path": fake.model_path}
                    if fake.build_info:
                        props["build_info"] = fake.build_info
                    if fake.mode == "big_props":
                        props["chat_template"] = "x" * (8 << 20)
                    return self.answer(200, props)
                self.answer(200, {"status": "ok"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.misbehave():
                    return
                if self.path.startswith("/tokenize"):
                    if fake.mode == "tokens_text":
                        return self.answer(200, {"tokens": "abc"})
                    if fake.mode == "token_2_40":
                        return self.answer(200, {"tokens": [1, 2, 1 << 40]})
                    return self.answer(200, {"tokens": fake.tokens})
                name = body.get("filename", "")
                path = fake.slot_dir / name
                if "action=save" in self.path and fake.mode == "link_file":
                    path.symlink_to(fake.link_target)  # a file outside, planted as the slot's
                    return self.answer(200, {"id_slot": 0, "filename": name, "n_saved": 1})
                if "action=save" in self.path:
                    path.write_bytes(fake.slot_bytes or state(fake.tokens))
                    if fake.mode == "n_saved_huge":
                        data = b'{"id_slot": 0, "filename": "%s", "n_saved": 1e400}' % name.encode()
                        return self.answer(200, data)
                    return self.answer(200, {"id_slot": 0, "filename": name,
                                             "n_saved": len(fake.tokens)})
                if "action=restore" in self.path:
                    fake.restored.append(path.read_bytes() if path.exists() else b"")
                    n = -5 if fake.mode == "negative" else len(fake.tokens)
                    return self.answer(200, {"id_slot": 0, "filename": name, "n_restored": n})
                self.answer(404, {"error": {"code": 404, "message": "no such endpoint"}})

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda *a: None  # a client that hung up on a misbehaviour
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        return False
