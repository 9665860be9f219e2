"""proxy.py [--pairs=50] [--reps=3] [--skip-gemma] - `tq slot proxy` (a benchmark, not a test)
against what a user has without it: the same llama-server, straight.

- A miss: a chat request of about 400 tokens the store has nothing for, the slot holding it
  already (the server processes one token), under --min-tokens (nothing saved): the proxy's
  whole cost (the template, the tokenizer, /slots, the store's lookup, the forwarding), as the
  median of --pairs interleaved pairs, proxy and straight.
- Time to first token after a restart: a conversation's next turn at about 2K and 8K tokens
  on SmolLM2-135M and 24K on Gemma 3 270M, the server restarted before it, straight (the
  server prefills it all) and through the proxy (the store restores the previous turn);
  medians of --reps, streamed (curl's time to the first byte of the first event's content).
TQ_ORACLES/bin/python3 tests/bench/proxy.py --pairs=50 --reps=3 > tests/bench/results/proxy.md"""
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import gemma, smollm2  # noqa: E402
from _proxy import Proxy  # noqa: E402
from _server import Server, server_binary  # noqa: E402
from _texts import source_text  # noqa: E402

ARGS = dict(a.split("=", 1) if "=" in a else (a, "1") for a in sys.argv[1:])
PAIRS = int(ARGS.get("--pairs", 50))
REPS = int(ARGS.get("--reps", 3))


def post_ms(url, body):
    """Milliseconds of one request, its JSON."""
    t0 = time.perf_counter()
    p = subprocess.run(["curl", "-s", "--max-time", "900", "-H", "Content-Type: application/json",
                        "-d", json.dumps(body), url], capture_output=True, check=True)
    return (time.perf_counter() - t0) * 1e3, json.loads(p.stdout)


def first_token_s(url, messages):
    """Seconds to the first event with content of a streamed chat answer."""
    body = json.dumps({"messages": messages, "max_tokens": 4, "temperature": 0, "stream": True})
    t0 = time.perf_counter()
    p = subprocess.Popen(["curl", "-sN", "--max-time", "1800", "-H",
                          "Content-Type: application/json", "-d", body, url],
                         stdout=subprocess.PIPE)
    took = None
    for line in p.stdout:
        if took is None and b'"content":"' in line:
            took = time.perf_counter() - t0
    p.wait()
    return took


def miss_cost(binary, model, tmp):
    slots = tmp / "m-slots"
    slots.mkdir()
    text = source_text("prose").decode()[:1400]
    messages = [{"role": "system", "content": text}, {"role": "user", "content": "One line?"}]
    body = {"messages": messages, "max_tokens": 1, "temperature": 0}
    with Server(binary, model, slots) as server, Proxy(server, tmp / "m-store") as proxy:
        straight = f"http://127.0.0.1:{server.port}/v1/chat/completions"
        through = proxy.url + "/v1/chat/completions"
        _, r = post_ms(straight, body)  # the slot holds the prompt from here on
        n = r["usage"]["prompt_tokens"]
        a, b = [], []
        for _ in range(PAIRS):
            a.append(post_ms(straight, body)[0])
            b.append(post_ms(through, body)[0])
    d = [y - x for x, y in zip(a, b)]
    return n, statistics.median(a), statistics.median(b), statistics.median(d)


def restart_ttft(binary, model, tmp, label, chars, ctx):
    """Time to first token of turn 2 after a restart, straight and through the proxy."""
    slots = tmp / f"{label}-slots"
    slots.mkdir()
    text = source_text("cpp").decode()[:chars]
    first = [{"role": "system", "content": text}, {"role": "user", "content": "Summarize."}]
    straight_s, proxy_s = [], []
    with Server(binary, model, slots, ctx=ctx) as server, \
            Proxy(server, tmp / f"{label}-store", "--timeout", "60") as proxy:
        _, r = post_ms(proxy.url + "/v1/chat/completions",
                       {"messages": first, "max_tokens": 16, "temperature": 0})
        answer = r["choices"][0]["message"]["content"]
        n = r["usage"]["prompt_tokens"]
        proxy.wait_requests(1, 600)
        proxy.wait_idle(600)
        for k in range(REPS):
            # a new question each time: the store holds the first turn, never this one
            second = first + [{"role": "assistant", "content": answer},
                              {"role": "user", "content": f"And the details of part {k + 1}?"}]
            server.restart()
            straight_s.append(first_token_s(f"http://127.0.0.1:{server.port}/v1/chat/completions",
                                            second))
            server.restart()
            proxy_s.append(first_token_s(proxy.url + "/v1/chat/completions", second))
            proxy.wait_requests(k + 2, 600)
            proxy.wait_idle(600)
        restored = proxy.lines(r"restored [1-9]")
    n = int(re.search(r"prompt (\d+) tokens", restored[-1]).group(1))
    return n, statistics.median(straight_s), statistics.median(proxy_s), restored[-1]


def main():
    binary = server_binary()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        n, a, b, diff = miss_cost(binary, smollm2(), tmp)
        print("# tq slot proxy against llama-server alone\n")
        print(f"`{' '.join(sys.argv)}` on {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores.\n")
        print("## A miss: what the proxy adds to a request\n")
        print(f"A chat request of {n} prompt tokens the slot already holds (the server processes "
              f"one), answered with one token; {PAIRS} interleaved pairs, SmolLM2-135M.\n")
        print("| path | median ms |\n|---|---|")
        print(f"| straight to llama-server | {a:.1f} |\n| through tq slot proxy | {b:.1f} |")
        print(f"| difference (median of pair differences) | {diff:+.1f} |\n")
        print("## Time to first token after a restart\n")
        print("A conversation's second turn after the server was restarted: straight (the "
              "server prefills the whole prompt) and through the proxy (the store's snapshot of "
              f"the first turn restored first). Medians of {REPS}, streamed.\n")
        print("| model | prompt tokens | straight s | proxy s | speed-up | proxy's log |")
        print("|---|---|---|---|---|---|")
        rows = [("SmolLM2-135M", smollm2, "s2k", 6000, 4096),
                ("SmolLM2-135M", smollm2, "s8k", 24000, 10240)]
        if "--skip-gemma" not in ARGS:
            rows.append(("Gemma 3 270M", gemma, "g24k", 72000, 28672))
        for name, model, label, chars, ctx in rows:
            n, s, p, line = restart_ttft(binary, model(), tmp, label, chars, ctx)
            what = line.split("slot 0: ", 1)[-1]
            print(f"| {name} | {n} | {s:.2f} | {p:.2f} | {s / p:.1f}x | {what} |", flush=True)


if __name__ == "__main__":
    main()
