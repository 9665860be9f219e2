"""slot_link.py [--reps=3] [--rates=1gbit,10gbit] [--skip-gemma] - restores from radosgw behind
a shaped link (a benchmark, not a test; root: it makes a network namespace).

The store is on the far side of a veth pair: Ceph's radosgw (tests/setup_s3.sh) runs in a
network namespace the bench makes, both ends of the pair shaped with tc's token bucket to each
rate.  llama-server, tq and curl stay on this side.  For a conversation's first turn at about
2K and 8K tokens on SmolLM2-135M and 24K on Gemma 3 270M (its defaults), at each rate:
- the link's rate as curl reached it moving the raw slot file;
- what a user does without tq: `curl --aws-sigv4 -o` of the raw slot file over the link, then
  the server's restore of it;
- `tq slot restore --name` of the same turn's snapshot (fetch, decode, the server's restore);
- the next turn's time to first token through `tq slot proxy` (its store behind the link)
  after a server restart, beside the server's own prefill of that prompt (straight, measured
  once: the link does not touch it);
- the proxy's save of the first turn: the server's raw save on the next request's path, and
  the background encode and upload (its log).
Medians of --reps interleaved runs.
sudo TQ_ORACLES/bin/python3 tests/bench/slot_link.py --reps=3 > tests/bench/results/slot_link.md
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
sys.path.insert(0, str(HERE))
from _timing import timed_call as timed, tq_slot  # noqa: E402
from _env import TQ, gemma, smollm2  # noqa: E402
from _proxy import Proxy  # noqa: E402
from _s3 import Store  # noqa: E402
from _server import Server, server_binary  # noqa: E402
from _texts import source_text  # noqa: E402
from proxy import first_token_s, post_ms  # noqa: E402

ARGS = dict(a.split("=", 1) if "=" in a else (a, "1") for a in sys.argv[1:])
REPS = int(ARGS.get("--reps", 3))
RATES = ARGS.get("--rates", "1gbit,10gbit").split(",")
NET = "10.231.7"  # the pair's /24: host .1, the namespace .2


def sh(*cmd):
    subprocess.run([str(c) for c in cmd], check=True, capture_output=True)


class Link:
    """A veth pair into a network namespace of its own; removed on exit (the pair with it)."""

    def __init__(self):
        self.ns = f"tqlink{os.getpid()}"
        self.host, self.peer = f"tqh{os.getpid()}", f"tqp{os.getpid()}"

    def __enter__(self):
        sh("ip", "netns", "add", self.ns)
        try:
            sh("ip", "link", "add", self.host, "type", "veth", "peer", "name", self.peer)
            sh("ip", "link", "set", self.peer, "netns", self.ns)
            sh("ip", "addr", "add", f"{NET}.1/24", "dev", self.host)
            sh("ip", "link", "set", self.host, "up")
            for cmd in (("ip", "addr", "add", f"{NET}.2/24", "dev", self.peer),
                        ("ip", "link", "set", self.peer, "up"), ("ip", "link", "set", "lo", "up")):
                sh("ip", "netns", "exec", self.ns, *cmd)
        except subprocess.CalledProcessError:
            self.__exit__()
            raise
        return self

    def shape(self, rate):
        """Both directions to rate (tc's units): a token bucket of 2 ms of the rate, at least
        64 KB, and 50 ms of queue."""
        bits = float(re.match(r"[\d.]+", rate).group()) * {"k": 1e3, "m": 1e6, "g": 1e9}[
            re.search(r"[kmg]", rate).group()]
        burst = max(65536, int(bits / 8 * 0.002))
        args = ["root", "tbf", "rate", rate, "burst", str(burst), "latency", "50ms"]
        sh("tc", "qdisc", "replace", "dev", self.host, *args)
        sh("ip", "netns", "exec", self.ns, "tc", "qdisc", "replace", "dev", self.peer, *args)

    def __exit__(self, *exc):
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.host], capture_output=True)


def conversation(s3, link, binary, model, tmp, label, chars, ctx):
    """The rows of one first turn: a dict a rate."""
    slots = tmp / f"{label}-slots"
    slots.mkdir()
    store = f"s3://bench/{label}"
    env = s3.tq_env()
    text = source_text("cpp").decode()[:chars]
    first = [{"role": "system", "content": text}, {"role": "user", "content": "Summarize."}]
    rows = {}
    link.shape(RATES[-1])
    with Server(binary, model, slots, ctx=ctx) as server, \
            Proxy(server, store, "--timeout", "120", env=env) as proxy:
        _, r = post_ms(proxy.url + "/v1/chat/completions",
                       {"messages": first, "max_tokens": 16, "temperature": 0})
        answer = r["choices"][0]["message"]["content"]
        proxy.wait_requests(1, 900)
        proxy.wait_idle(900)
        saved = proxy.lines(r"saved \d+ tokens")[-1].split("slot 0: ", 1)[-1]
        server_url = f"http://127.0.0.1:{server.port}"
        common = ["--server", server_url, "--slot-dir", slots, "--store", store, "--model", model]
        tq_slot(TQ, env, "save", *common, "--name", "first")
        server.slot("save", "raw.bin")
        raw = slots / "raw.bin"
        raw_mb = raw.stat().st_size / 1e6
        s3.bucket("raw")
        subprocess.run(s3.curl_args("-T", raw, f"{s3.endpoint}/raw/{label}.bin"), check=True,
                       capture_output=True)
        raw.unlink()
        snap_mb = max(e["bytes"] for e in json.loads(subprocess.run(
            [TQ, "slot", "ls", store, "--json"], capture_output=True, text=True,
            env=env).stdout)) / 1e6

        def raw_restore():
            subprocess.run(s3.curl_args("-o", raw, f"{s3.endpoint}/raw/{label}.bin"), check=True,
                           capture_output=True)
            server.slot("restore", "raw.bin")
            raw.unlink()

        def second(k):
            return first + [{"role": "assistant", "content": answer},
                            {"role": "user", "content": f"And the details of part {k}?"}]

        server.restart()
        prefill = first_token_s(f"{server_url}/v1/chat/completions", second(0))
        n_req = 1
        for rate in RATES:
            link.shape(rate)
            move = timed(lambda: subprocess.run(
                s3.curl_args("-o", raw, f"{s3.endpoint}/raw/{label}.bin"), check=True,
                capture_output=True))
            raw.unlink()
            t = {"raw": [], "tq": [], "proxy": []}
            said = []
            for k in range(REPS):
                t["raw"].append(timed(raw_restore))
                t["tq"].append(timed(lambda: said.append(tq_slot(TQ, env, "restore", *common,
                                                                 "--name", "first"))))
                server.restart()
                t["proxy"].append(first_token_s(proxy.url + "/v1/chat/completions",
                                                second(n_req)))
                n_req += 1
                proxy.wait_requests(n_req, 900)
                proxy.wait_idle(900)
            restored = proxy.lines(r"restored [1-9]")[-1].split("slot 0: ", 1)[-1]
            rows[rate] = dict({k: statistics.median(v) for k, v in t.items()},
                              rate=raw_mb / move, restored=restored,
                              tq_said=said[-1].strip().splitlines()[-1].split("slot 0: ", 1)[-1])
        n = int(re.search(r"prompt (\d+) tokens", restored).group(1))
    return n, raw_mb, snap_mb, prefill, saved, rows


def main():
    if os.geteuid():
        raise SystemExit("SKIP: slot_link.py makes a network namespace: run it as root")
    binary = server_binary()
    print("# Restores over a shaped link\n")
    print(f"`{' '.join(sys.argv)}` on "
          f"{subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores: "
          "radosgw in a network namespace behind a veth pair shaped with `tc tbf` at each "
          f"rate; medians of {REPS} interleaved runs.\n")
    print("| model | prompt tokens | link | reached MB/s | raw slot MB | snapshot MB | "
          "raw move + restore s | tq slot restore s | ratio | proxy TTFT s | "
          "server prefill s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    rows = [("SmolLM2-135M", smollm2, "s2k", 6000, 4096),
            ("SmolLM2-135M", smollm2, "s8k", 24000, 10240)]
    if "--skip-gemma" not in ARGS:
        rows.append(("Gemma 3 270M", gemma, "g24k", 72000, 28672))
    with tempfile.TemporaryDirectory() as d, Link() as link, \
            Store(netns=link.ns, listen=f"{NET}.2") as s3:
        tmp = Path(d)
        s3.bucket("bench")
        key = f"{s3.env['AWS_ACCESS_KEY_ID']}:{s3.env['AWS_SECRET_ACCESS_KEY']}"
        s3.curl_args = lambda *a: ["curl", "-sf", "--max-time", "600", "--aws-sigv4",
                                   f"aws:amz:{s3.env['AWS_REGION']}:s3", "--user", key,
                                   "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", *map(str, a)]
        for name, model, label, chars, ctx in rows:
            n, raw_mb, snap_mb, prefill, saved, by_rate = conversation(
                s3, link, binary, model(), tmp, label, chars, ctx)
            for rate, m in by_rate.items():
                print(f"| {name} | {n} | {rate} | {m['rate']:.0f} | {raw_mb:.1f} | {snap_mb:.2f} | "
                      f"{m['raw']:.2f} | {m['tq']:.2f} | {m['tq'] / m['raw']:.2f} | "
                      f"{m['proxy']:.2f} | {prefill:.2f} |", flush=True)
                notes.append(f"- {name}, {n} tokens, {rate}: tq slot restore: {m['tq_said']}; "
                             f"the proxy: {m['restored']}")
            notes.append(f"- {name}, {n} tokens: the proxy's save of the first turn: {saved}")
    print("\nratio < 1: tq is faster.  What tq slot restore and the proxy said (each row's "
          "last run; of a save, the raw save is what the next request on the slot waits for, "
          "the rest runs in the background):\n")
    print("\n".join(notes))


if __name__ == "__main__":
    main()
