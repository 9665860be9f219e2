"""server_slots.py [--tokens=2048,8192] [--reps=3] - llama-server's slot
workflow with tq (issue 23; a benchmark, not a test).  Gemma 3 270M in
llama-server (tests/setup_server.sh), prompts of our own text (the `docs`
text of long_sessions.py), with --swa-full (without it the server processes
the whole prompt again after restoring a Gemma slot: tests/oracle/
server_slots.py).  Per prompt length:

- sizes: the slot file, the default and small snapshots;
- times (medians of interleaved runs): the server's save (its save_ms) and
  `tq encode-kvdump --model`, `tq decode-kvdump` and the server's restore
  (restore_ms), and what a store at 200 MB/s adds to each (size / 200 MB/s);
- agreement with the raw slot's continuation (48 greedy tokens): tokens
  before the first divergence, and the mean KL over the top-20
  log-probabilities the server returns, teacher-forced along the raw
  slot's 48 tokens (one request a token), for the balanced and small snapshots, for llama.cpp's own q8_0
  cache (the same prompt prefilled into -ctk q8_0 -ctv q8_0) and for an
  uncompressed prefill that differs only in batching (-ub 64 instead of 512).
TQ_ORACLES/bin/python3 tests/bench/server_slots.py"""
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import TQ, gemma  # noqa: E402
from _server import Server, agreement, kl_along, server_binary  # noqa: E402
from long_sessions import text_of  # noqa: E402

OPTS = dict(a.split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
TOKENS = [int(t) for t in OPTS.get("--tokens", "2048,8192").split(",")]
REPS = int(OPTS.get("--reps", 3))
STEPS = 48
STORE = 200e6  # bytes a second


def timed(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - t0


def prefill(s, prompt):
    """Seconds the server takes to process the prompt from nothing."""
    s.slot("erase")
    return s.complete(prompt, 1)["prompt_s"]


def continuation(s, name, prompt):
    """Steps after restoring name, and the seconds to resume."""
    got = s.resume(name, prompt, STEPS)
    assert got["processed"] == 1, f"{name}: the server processed {got['processed']} prompt tokens"
    return got["steps"], got["resume_s"]


def one(binary, model, work, n, mode, flags):
    slots = work / f"{n}"
    slots.mkdir()
    rows = []
    with Server(binary, model, slots, *flags, ctx=n + 256) as s:
        prompt = s.tokenize(text_of("docs"))[:n]
        t = {k: [] for k in ("prefill", "save", "enc", "encs", "dec", "decs", "resume", "resume_d",
                             "resume_s")}
        for _ in range(REPS):
            t["prefill"].append(prefill(s, prompt))
            t["save"].append(s.slot("save", "raw.bin")["timings"]["save_ms"] / 1e3)
            for k, preset, out in (("enc", "balanced", "d"), ("encs", "small", "s")):
                t[k].append(timed([TQ, "encode-kvdump", slots / "raw.bin", "-o", slots / f"{out}.tqkv",
                                   "--model", model, "--preset", preset, "-q"]))
            for k, out in (("dec", "d"), ("decs", "s")):
                t[k].append(timed([TQ, "decode-kvdump", slots / f"{out}.tqkv", "-o", slots / f"{out}.bin",
                                   "-q"]))
            for k, f in (("resume", "raw.bin"), ("resume_d", "d.bin"), ("resume_s", "s.bin")):
                t[k].append(continuation(s, f, prompt)[1])
        m = {k: statistics.median(v) for k, v in t.items()}
        raw, _ = continuation(s, "raw.bin", prompt)
        size = {k: (slots / f).stat().st_size for k, f in (("raw", "raw.bin"), ("d", "d.tqkv"), ("s", "s.tqkv"))}
        rows.append((n, "slot file", size["raw"], size["raw"], m["prefill"], m["save"], 0.0, 0.0,
                     m["resume"], STEPS, 0.0))
        for name, k, enc, dec, res in (("tq balanced", "d", "enc", "dec", "resume_d"),
                                       ("tq small", "s", "encs", "decs", "resume_s")):
            steps, _ = continuation(s, f"{k}.bin", prompt)
            rows.append((n, name, size["raw"], size[k], m["prefill"], m["save"], m[enc], m[dec], m[res],
                         agreement(raw, steps)[0], kl_along(s, prompt, raw, restore=f"{k}.bin")))
    floors = []
    for name, extra in (("llama.cpp q8_0 cache", ["-ctk", "q8_0", "-ctv", "q8_0"]), ("batching (-ub 64)", ["-ub", "64"])):
        with Server(binary, model, slots, *flags, *extra, ctx=n + 256) as s:
            prefill(s, prompt)
            steps = s.complete(prompt, STEPS)["steps"]
            prefill(s, prompt)
            floors.append((n, name, agreement(raw, steps)[0], kl_along(s, prompt, raw)))
    return rows, floors


def main():
    binary = server_binary()
    model = gemma()
    rows, floors = [], []
    with tempfile.TemporaryDirectory() as td:
        work = Path(td)
        for n in TOKENS:
            r, f = one(binary, model, work, n, "--swa-full", ["--swa-full"])
            rows += r
            floors += f
            print(f"{n} done", file=sys.stderr, flush=True)
    print("| tokens | stored | MB | ratio | save s | encode s | to a 200 MB/s store s | "
          "back from it s | decode s | resume s | tokens agreeing | KL top-20, forced |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, name, raw, size, pre, save, enc, dec, resume, agree, kl in rows:
        print(f"| {n} | {name} | {size / 1e6:.2f} | {raw / size:.2f} | {save:.3f} | {enc:.3f} | "
              f"{save + enc + size / STORE:.3f} | {size / STORE + dec + resume:.3f} | {dec:.3f} | "
              f"{resume:.3f} | {agree} of {STEPS} | {kl:.4f} |")
    print("\n| tokens | prompt processed from nothing s | compared with the slot file's continuation | "
          "tokens agreeing | KL top-20, forced |")
    print("|---|---|---|---|---|")
    pre = {r[0]: r[4] for r in rows}
    for n, name, agree, kl in floors:
        print(f"| {n} | {pre[n]:.2f} | {name} | {agree} of {STEPS} | {kl:.4f} |")
    print(f"\nmedians of {REPS} interleaved runs; llama-server --swa-full -fa on -t 2, Gemma 3 270M "
          f"Q4_K_M; {STEPS} greedy tokens; resume: the server's restore_ms and its prompt_ms for the "
          "one token it processes again; store: save + encode + size / 200 MB/s; back: size / "
          "200 MB/s + decode + resume")


if __name__ == "__main__":
    main()
