"""Shared by the llama-server tests and benchmark (not a test itself):
llama-server as tests/setup_server.sh builds it, started on 127.0.0.1 with a
free port, a model and a slot directory, and always stopped (also when the
test fails or is killed: the server gets SIGKILL when its parent dies)."""
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from _env import ROOT, TEST_THREADS


def server_binary():
    """The llama-server binary; exit 77 with the reason when it cannot be had."""
    p = subprocess.run(["sh", str(ROOT / "tests" / "setup_server.sh")], capture_output=True, text=True)
    path = p.stdout.strip()
    if not path:
        why = p.stderr.strip().splitlines()
        print(f"no llama-server: {why[-1] if why else 'tests/setup_server.sh made none'}")
        sys.exit(77)
    return path


STARTED = []  # (pid, port) of every server this process started


def left_behind():
    """The servers this process started that still run or still hold their port."""
    left = []
    for pid, port in STARTED:
        try:
            os.kill(pid, 0)
            left.append(f"pid {pid}")
            continue
        except ProcessLookupError:
            pass
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                left.append(f"port {port}")
    return left


def servers_stopped():
    """The behaviour every server test ends with: the servers it started are gone."""
    from _env import fail, ok
    left = left_behind()
    if left:
        fail("servers_are_stopped", ", ".join(left))
    else:
        ok("servers_are_stopped")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    """In the child before exec: SIGKILL when the test process dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Server:
    """with Server(binary, model, slots, "--swa-full") as s: s.post(...).  Flags
    beyond the fixed ones (one slot, no RAM prompt cache, flash attention on,
    2 threads, or TQ_TEST_THREADS) are appended."""

    def __init__(self, binary, model, slots, *flags, ctx=4096, save_path=True, port=None,
                 threads=None):
        self.binary, self.model, self.slots = binary, Path(model), Path(slots)
        self.threads = threads or TEST_THREADS or 2
        self.flags, self.ctx = list(flags), ctx
        self.fixed_port = port  # restarted on the same port (a proxy in front knows it)
        self.save_path = save_path  # False: no --slot-save-path (slots actions answer 501)
        self.proc = None
        self.log = self.slots.parent / "server.log"

    def __enter__(self):
        for _ in range(3):  # another process may take the port first
            self.port = self.fixed_port or free_port()
            cmd = [self.binary, "-m", str(self.model), "--host", "127.0.0.1", "--port", str(self.port),
                   *(["--slot-save-path", str(self.slots)] if self.save_path else []),
                   "-c", str(self.ctx), "-np", "1", "-cram", "0",
                   "-fa", "on", "-t", str(self.threads), "--no-warmup", *self.flags]
            with open(self.log, "w") as log:
                self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
            STARTED.append((self.proc.pid, self.port))
            if self._wait_healthy():
                return self
            self.stop()
        raise SystemExit(f"llama-server did not start: {self.log_tail()}")

    def __exit__(self, *exc):
        self.stop()
        return False

    def restart(self):
        """Stopped and started again on the same port: its slots empty."""
        self.stop()
        self.fixed_port = self.port
        return self.__enter__()

    def _wait_healthy(self, timeout=180):
        end = time.time() + timeout
        while time.time() < end and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                    if r.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.2)
        return False

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def log_tail(self, n=5):
        try:
            return " | ".join(self.log.read_text(errors="replace").strip().splitlines()[-n:])
        except OSError:
            return "(no log)"

    def post(self, path, body=None, ok=True):
        """The JSON answer; with ok, an HTTP error ends the test with the server's words."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                     data=json.dumps(body or {}).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            if ok:
                raise SystemExit(f"POST {path}: HTTP {e.code}: {text[:300]}")
            return {"http_status": e.code, "error": text}

    def tokenize(self, text):
        return self.post("/tokenize", {"content": text, "add_special": True})["tokens"]

    def detokenized(self, tokens):
        """A text whose tokens the server makes again (tokens without the BOS the tokenizer
        adds)."""
        return self.post("/detokenize", {"tokens": tokens[1:]})["content"]

    def prefill(self, tokens):
        """Slot 0 holds the prompt's cells (those it already holds kept)."""
        self.post("/completion", {"prompt": tokens, "n_predict": 0, "id_slot": 0,
                                  "cache_prompt": True})

    def hold(self, tokens, name):
        """Slot 0 holds tokens and nothing after them: restored from the server's own save
        `name` in its slot folder where there is one (milliseconds), else prefilled and saved
        as `name` (seconds), so that a script prefills a state once.  The same cells either
        way."""
        self.slot("erase")
        if (self.slots / name).exists():
            self.slot("restore", name)
        else:
            self.prefill(tokens)
            self.slot("save", name)

    def slot(self, action, filename=None, ok=True):
        body = {"filename": filename} if filename else {}
        return self.post(f"/slots/0?action={action}", body, ok=ok)

    def resume(self, name, prompt, n_predict):
        """Slot 0 erased, restored from name and continued: complete's answer, with the
        tokens restored and the seconds to resume (the server's restore and its processing
        of the prompt's tokens)."""
        self.slot("erase")
        r = self.slot("restore", name)
        got = self.complete(prompt, n_predict)
        got["restored"] = r["n_restored"]
        got["resume_s"] = r["timings"]["restore_ms"] / 1e3 + got["prompt_s"]
        return got

    def complete(self, prompt, n_predict, n_probs=20):
        """Greedy continuation of prompt (token ids): steps [(token, {token: log-prob of the top
        n_probs})], the prompt tokens the server processed (those not taken from the slot's
        cells) and the seconds it took, the text."""
        r = self.post("/completion", {"prompt": prompt, "n_predict": n_predict, "temperature": 0,
                                      "n_probs": n_probs, "id_slot": 0, "cache_prompt": True,
                                      "return_tokens": True, "top_k": 1, "seed": 1, "ignore_eos": True})
        steps = []
        for s in r.get("completion_probabilities", []):
            top = {t["id"]: float(t["logprob"]) for t in s["top_logprobs"]}
            steps.append((s["id"], top))
        return {"steps": steps, "processed": r["timings"]["prompt_n"],
                "prompt_s": r["timings"]["prompt_ms"] / 1e3, "content": r.get("content", "")}


def forced_tops(server, prompt, tokens, n_probs=20, most=1):
    """Teacher forcing through the server: after prompt + tokens[:i], the
    top n_probs log-probabilities of the next token, for every i.  Each
    request shares all but its last token with the slot's cells, so the
    server processes one token a request, as it does when generating (at
    most `most`: a server that keeps a sliding window as a ring may go back
    to a context checkpoint and process the tokens after it again)."""
    tops = []
    for i in range(len(tokens)):
        r = server.complete(list(prompt) + list(tokens[:i]), 1, n_probs)
        assert 1 <= r["processed"] <= most, \
            f"step {i}: the server processed {r['processed']} tokens (at most {most})"
        tops.append(r["steps"][0][1])
    return tops


def forced_kl(ref, test):
    """Mean top_kl over teacher-forced steps."""
    return sum(top_kl(a, b) for a, b in zip(ref, test)) / len(ref)


def kl_along(server, prompt, ref_steps, restore=None):
    """Mean KL of the server's slot (restored from `restore` first, if given) against
    ref_steps (complete's steps), teacher-forced along ref_steps' tokens."""
    if restore:
        server.slot("erase")
        server.slot("restore", restore)
    tops = forced_tops(server, prompt, [tok for tok, _ in ref_steps])
    return forced_kl([top for _, top in ref_steps], tops)


def top_kl(a, b):
    """KL(a || b) over the tokens either returned, each side renormalized
    there; a token one side did not return gets that side's smallest
    returned probability (so it is never 0 and the sum never negative)."""
    import math
    keys = set(a) | set(b)
    def dist(d):
        floor = min(d.values())
        p = {t: math.exp(d.get(t, floor)) for t in keys}
        z = sum(p.values())
        return {t: v / z for t, v in p.items()}
    pa, pb = dist(a), dist(b)
    return sum(pa[t] * math.log(pa[t] / pb[t]) for t in keys)


def agreement(ref, test):
    """Tokens before the first divergence, and the mean top_kl(ref, test)
    over the steps that share a context (those before the divergence and the
    divergent one)."""
    n = 0
    while n < min(len(ref), len(test)) and ref[n][0] == test[n][0]:
        n += 1
    kls = [top_kl(a, b) for (_, a), (_, b) in zip(ref[: n + 1], test[: n + 1])]
    return n, (sum(kls) / len(kls) if kls else 0.0)
