"""A pool under load (issue 56): four llama-servers, each behind a `tq slot proxy`, sharing one
store on radosgw whose size gc keeps bounded (`--max-size`), and 32 conversations at once.
Two servers run one tiny generated model (a conversation alternates between them: each turn
restores what the other server saved), one a tiny sliding-window model, one SmolLM2-135M.

    python3 tests/oracle/slot_pool.py [--turns=N] [--minutes=M] [--report=FILE]

make test runs the short form (3 turns a conversation); tests/bench/results/slot_pool.md has the
long form (--minutes=10: conversations go on, turn after turn, until then).  Checked:
- no request fails (every answer 200);
- no restore comes from another conversation: each answer's first token has the
  probabilities a cold prefill of the same prompt on a server of the same model gives (top
  five within 0.03; 0.15 for SmolLM2, whose proxy saves with the default preset), every turn
  of the tiny models' conversations and the last of SmolLM2's;
- restores happen: a quarter of later turns at least process under half their prompts' tokens,
  four of them at least restored from the store (a tight bound evicts many sessions);
- no snapshot a proxy saved is gone from the store unless a gc evicted it (the proxies' logs);
- the store stays within its bound plus one largest snapshot for each of the four writers,
  at every look (every 2 s), and `tq slot check` finds it clean at the end;
- each proxy's resident memory after the first turns grows by less than 16 MiB.
Loops bounded in count and time, loopback only; every process is stopped at the end."""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FAILED, ROOT, TQ, fail, ok, smollm2  # noqa: E402
from _proxy import Proxy  # noqa: E402
from _s3 import Store  # noqa: E402
from _server import Server, server_binary, servers_stopped  # noqa: E402
from _tiny_models import build  # noqa: E402

TEXT = "\n\n".join(p.read_text() for p in sorted((ROOT / "tests" / "oracle" / "prompts").glob("*.txt")))
OPTS = dict(a.split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
TURNS = int(OPTS.get("--turns", 3))
MINUTES = float(OPTS.get("--minutes", 0))
CONVERSATIONS = 32
CHAT_TURNS = 10  # a conversation's chats start over after this many turns (a slot holds 4096)
BOUND = 12 << 20
RSS_GROWTH = 16 << 20
QUESTIONS = ["What is this about?", "Say more.", "And then?", "Why?", "Go on.", "Is that all?"]


def post(url, body, timeout=600):
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, {"error": e.read()[:300].decode(errors="replace")}
    except OSError as e:
        return 0, {"error": str(e)}


def first_probs(answer):
    """The first generated token's top probabilities: {token: p}."""
    steps = answer.get("completion_probabilities") or [{}]
    return {t["id"]: math.exp(float(t["logprob"])) for t in steps[0].get("top_logprobs", [])}


def rss(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) << 10
    return 0


class Pool:
    def __init__(self, work, s3, binary):
        models = work / "models"
        tiny = build("mistral3", models)
        window = build("gpt-oss", models)
        self.plan = [("tiny", tiny, "lossless"), ("tiny", tiny, "lossless"),
                     ("window", window, "lossless"), ("smollm2", smollm2(), "balanced")]
        self.work, self.s3, self.binary = work, s3, binary
        self.store = "s3://pool/store"
        self.log = []  # (conversation, turn, proxy index, status, prompt tokens, processed)
        self.replays = []  # (proxy index, prompt text, first-token probabilities, tolerance)
        self.lock = threading.Lock()
        self.sizes = []  # the store's snapshot bytes at each look
        self.largest = 0

    def conversation(self, c, proxies, deadline):
        label = self.plan[c % 4][0]
        # its servers: both tiny ones alternately, else its own
        mine = [i for i, p in enumerate(self.plan) if p[0] == label]
        turn = 0
        while (turn < TURNS and not MINUTES) or (MINUTES and time.time() < deadline):
            if turn % CHAT_TURNS == 0:  # a new chat: its own text, no other conversation's
                start = 400 + 97 * c + 13 * (turn // CHAT_TURNS)
                prompt = f"Conversation {c}, chat {turn // CHAT_TURNS}.\n"
                prompt += TEXT[start:start + 1600] + "\n"
            i = mine[turn % len(mine)]
            prompt += f"User: {QUESTIONS[turn % len(QUESTIONS)]}\nAssistant:"
            status, ans = post(proxies[i].url + "/completion",
                               {"prompt": prompt, "n_predict": 6, "temperature": 0,
                                "n_probs": 5, "cache_prompt": True})
            timings = ans.get("timings", {})
            with self.lock:
                self.log.append((c, turn, i, status, ans.get("tokens_evaluated", 0),
                                 timings.get("prompt_n", -1), ans.get("error", "")))
                if status == 200 and (label != "smollm2" or not self.more(turn, deadline)):
                    tol = 0.15 if label == "smollm2" else 0.03
                    self.replays.append((i, prompt, first_probs(ans), tol))
            prompt += (ans.get("content") or "") + "\n"
            turn += 1
            if status != 200:
                break

    def more(self, turn, deadline):
        return turn + 1 < TURNS if not MINUTES else time.time() < deadline

    def watch(self, stop):
        bucket, prefix = "pool", "store%2Fsnap%2F"
        while not stop.wait(2):
            _, body = self.s3.curl("GET", f"{bucket}?list-type=2&prefix={prefix}")
            sizes = [int(x) for x in re.findall(rb"<Size>(\d+)</Size>", body)]
            with self.lock:
                self.sizes.append(sum(sizes))
                self.largest = max([self.largest, *sizes])

    def run(self):
        dirs = [self.work / f"s{i}" for i in range(4)]
        servers, proxies = [], []
        env = self.s3.tq_env()
        try:
            for i, (label, model, preset) in enumerate(self.plan):
                (dirs[i] / "slots").mkdir(parents=True)
                servers.append(Server(self.binary, model, dirs[i] / "slots", "--parallel", "2",
                                      ctx=8192).__enter__())
                proxies.append(Proxy(servers[i], self.store, "--preset", preset, "--model",
                                     str(model), "--max-size", str(BOUND), "--min-tokens", "256",
                                     "--timeout", "30", env=env,
                                     log=dirs[i] / "proxy.log",
                                     tq=os.environ.get("POOL_TQ")).__enter__())
            stop = threading.Event()
            watcher = threading.Thread(target=self.watch, args=(stop,))
            watcher.start()
            deadline = time.time() + 60 * MINUTES
            threads = [threading.Thread(target=self.conversation, args=(c, proxies, deadline))
                       for c in range(CONVERSATIONS)]
            t0 = time.time()
            for t in threads:
                t.start()
            while sum(1 for e in self.log if e[1] == 0) < CONVERSATIONS and \
                    any(t.is_alive() for t in threads):  # warm-up: every first turn answered
                time.sleep(0.2)
            warm = [rss(p.proc.pid) for p in proxies]
            for t in threads:
                t.join()
            took = time.time() - t0
            for p in proxies:
                p.wait_idle()
            end = [rss(p.proc.pid) for p in proxies]
            stop.set()
            watcher.join()
            self.check(servers, proxies, warm, end, took)
        finally:
            for p in proxies:
                p.stop()
            for s in servers:
                s.__exit__(None, None, None)

    def check(self, servers, proxies, warm, end, took):
        n = len(self.log)
        failed = [e for e in self.log if e[3] != 200]
        print(f"  {n} requests in {took:.0f} s by {CONVERSATIONS} conversations", flush=True)
        name = "no_request_of_a_pool_under_load_fails"
        if failed or n < CONVERSATIONS * TURNS:
            fail(name, f"{len(failed)} of {n} failed: {failed[:3]}")
        else:
            ok(name)

        name = "a_pool_restores_each_conversation_from_its_own_sessions"
        wrong = []
        for i, prompt, probs, tol in self.replays:
            status, cold = post(f"http://127.0.0.1:{servers[i].port}/completion",
                                {"prompt": prompt, "n_predict": 1, "temperature": 0,
                                 "n_probs": 5, "cache_prompt": False})
            ref = first_probs(cold)
            diff = max([abs(probs.get(t, 0) - p) for t, p in ref.items()] or [1])
            if status != 200 or diff > tol:
                wrong.append((i, round(diff, 3)))
        later = [e for e in self.log if e[1] % CHAT_TURNS > 0 and e[3] == 200]
        restored = [e for e in later if 0 <= e[5] < e[4] / 2]
        logs = "".join(p.log.read_text(errors="replace") for p in proxies)
        self.from_store = len(re.findall(r"held \d+, restored [1-9]\d* from", logs))
        if wrong or len(restored) < len(later) / 4 or self.from_store < 4:
            fail(name, f"first tokens off a cold prefill: {wrong[:5]} of {len(self.replays)}; "
                       f"{len(restored)} of {len(later)} later turns processed less than half"
                       f", {self.from_store} restores from the store")
        else:
            print(f"  {len(self.replays)} answers as a cold prefill gives; {len(restored)} of "
                  f"{len(later)} later turns restored ({self.from_store} from the store)",
                  flush=True)
            ok(name)

        name = "a_pool_keeps_its_store_within_the_bound"
        most = BOUND + 4 * self.largest
        over = [s for s in self.sizes if s > most]
        rc = subprocess.run([TQ, "slot", "check", self.store], env=self.s3.tq_env(),
                            capture_output=True, text=True)
        if over or not self.sizes or rc.returncode:
            fail(name, f"{len(over)} of {len(self.sizes)} looks over {most} bytes (largest "
                       f"{self.largest}): {over[:3]}; check: {rc.stderr.strip()[-500:]}")
        else:
            print(f"  the store at most {max(self.sizes) / 1e6:.1f} MB at {len(self.sizes)} "
                  f"looks (bound {BOUND / 1e6:.1f} MB, largest snapshot "
                  f"{self.largest / 1e6:.1f} MB)", flush=True)
            ok(name)

        name = "a_pool_loses_no_snapshot_the_bound_did_not_evict"
        logs = "".join(p.log.read_text(errors="replace") for p in proxies)
        saved = set(re.findall(r"saved \d+ tokens as ([0-9a-f]{16}-[0-9a-f]{16})", logs))
        evicted = set(re.findall(r"the store's gc: evicted ([0-9a-f]{16}-[0-9a-f]{16})", logs))
        _, body = self.s3.curl("GET", "pool?list-type=2&prefix=store%2Fsnap%2F")
        present = set(re.findall(rb"<Key>store/snap/([0-9a-f-]{33})\.tqkv</Key>", body))
        present = {x.decode() for x in present}
        lost = saved - evicted - present
        if lost or not saved or not evicted:
            fail(name, f"{len(lost)} of {len(saved)} saved snapshots gone, not evicted: "
                       f"{sorted(lost)[:3]} ({len(evicted)} evicted, {len(present)} present)")
        else:
            print(f"  {len(saved)} snapshots saved, {len(evicted)} evicted by gc, "
                  f"{len(present)} in the store at the end, none lost", flush=True)
            ok(name)
        self.counts = (len(saved), len(evicted), len(present), len(lost))

        name = "a_pool_proxys_memory_stays_flat"
        grew = [e - w for w, e in zip(warm, end)]
        if any(g >= RSS_GROWTH for g in grew):
            fail(name, f"RSS growth by proxy: {[g >> 20 for g in grew]} MiB")
        else:
            print(f"  proxies' RSS growth after warm-up: {[round(g / 2**20, 1) for g in grew]} "
                  f"MiB", flush=True)
            ok(name)
        report = OPTS.get("--report")
        if report:
            self.report(Path(report), n, took, failed, restored, later, wrong, grew, rc)

    def report(self, path, n, took, failed, restored, later, wrong, grew, check):
        saved, evicted, present, lost = self.counts
        rows = [("requests (all answered 200?)", f"{n} ({'yes' if not failed else len(failed)})"),
                ("conversations at once", CONVERSATIONS),
                ("minutes", f"{took / 60:.1f}"),
                ("answers replayed against a cold prefill, off it", f"{len(self.replays)}, "
                 f"{len(wrong)}"),
                ("later turns restored (processed < half their prompt)",
                 f"{len(restored)} of {len(later)}"),
                ("restores from the store (the rest: the server's slot held it)",
                 self.from_store),
                ("snapshots saved / evicted by gc / in the store at the end / lost",
                 f"{saved} / {evicted} / {present} / {lost}"),
                ("store's snapshot bytes at most (looks every 2 s)",
                 f"{max(self.sizes) / 1e6:.1f} MB at {len(self.sizes)} looks"),
                ("bound, largest snapshot", f"{BOUND / 1e6:.1f} MB, {self.largest / 1e6:.1f} MB"),
                ("proxies' RSS growth after warm-up (MiB)",
                 ", ".join(f"{g / 2**20:.1f}" for g in grew)),
                ("`tq slot check` at the end", "clean" if not check.returncode else "problems")]
        lines = ["# A pool under load", "",
                 f"`python3 tests/oracle/slot_pool.py --minutes={MINUTES:g} --report={path}` on "
                 f"{os.cpu_count()} cores: four llama-servers (`--parallel 2`), each behind "
                 "`tq slot proxy --max-size 12 MiB`, one radosgw store; two servers run a tiny "
                 "Mistral-shaped model (a conversation alternates between them, so each turn "
                 "restores what the other saved), one a tiny gpt-oss-shaped model (sliding "
                 "window), one SmolLM2-135M (preset balanced).", "",
                 "| what | measured |", "|---|---|"]
        lines += [f"| {a} | {b} |" for a, b in rows]
        path.write_text("\n".join(lines) + "\n")


def main():
    binary = server_binary()
    with tempfile.TemporaryDirectory() as td, Store() as s3:
        s3.bucket("pool")
        Pool(Path(td), s3, binary).run()
    servers_stopped()
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
