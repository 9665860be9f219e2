"""slot_checkpoint_every.py - what `tq slot save --checkpoint-every K` would cost (a measurement
for a design decision, not a test): Gemma 3 270M in llama-server (default flags), a session of
N tokens prefilled whole and saved once, against the same prompt prefilled in steps of K tokens
with `tq slot save` after each step (every step a restore point, as the flag would make them):
the prefill and save time, and the store's bytes.  One run each (the wall times are seconds
apart, not percent).
TQ_ORACLES/bin/python3 tests/bench/slot_checkpoint_every.py [--tokens=4096] [--every=1024]"""
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import ROOT, TQ, gemma  # noqa: E402
from _server import Server, server_binary  # noqa: E402

ARGS = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
N = int(ARGS.get("--tokens", 4096))
K = int(ARGS.get("--every", 1024))
TEXT = "\n\n".join(p.read_text() for p in sorted((ROOT / "tests" / "oracle" / "prompts").glob("*.txt")))
TEXT += "\n\n" + "\n\n".join(p.read_text() for p in sorted((ROOT / "tests" / "bench" / "prompts").glob("*")))


def store_bytes(store):
    return sum(p.stat().st_size for p in Path(store).rglob("*") if p.is_file())


def run(s, slots, store, model, toks, steps):
    t0 = time.perf_counter()
    for k in steps:
        s.post("/completion", {"prompt": toks[:k], "n_predict": 0, "id_slot": 0,
                               "cache_prompt": True})
        p = subprocess.run([TQ, "slot", "save", "--server", f"http://127.0.0.1:{s.port}",
                            "--slot-dir", slots, "--store", store, "--model", model, "--quiet"],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
    return time.perf_counter() - t0, store_bytes(store)


def main():
    model = gemma()
    with tempfile.TemporaryDirectory() as td:
        work = Path(td)
        slots = work / "slots"
        slots.mkdir()
        with Server(server_binary(), model, slots, ctx=N + 256) as s:
            toks = s.tokenize(TEXT)[:N]
            s.slot("erase")
            once = run(s, slots, work / "once", model, toks, [N])
            s.slot("erase")
            every = run(s, slots, work / "every", model, toks, list(range(K, N, K)) + [N])
    print(f"Gemma 3 270M, {N} tokens, llama-server default flags, tq slot save (balanced)")
    print(f"| | prefill + saves | store | restore points |")
    print(f"|---|---|---|---|")
    print(f"| saved once | {once[0]:.1f} s | {once[1] / 1e6:.2f} MB | {N} |")
    print(f"| saved every {K} | {every[0]:.1f} s ({every[0] / once[0]:.2f}x) | "
          f"{every[1] / 1e6:.2f} MB ({every[1] / once[1]:.2f}x) | "
          f"{', '.join(str(k) for k in list(range(K, N, K)) + [N])} |")


if __name__ == "__main__":
    main()
