"""Benchmark (not a test): tq quantize-tq4 (and rotate-weights) on a generated 2 GiB F16 llama-
shaped model (22 layers, n_embd 2048, n_ff 5632, 32000-token vocabulary; Student-t weights), on all
cores: wall time, throughput in MB/s of input, and peak resident memory
(ru_maxrss of the child) against the bound the design promises: about two
slices of 4 Mi float32 values plus the output buffer, far below 2x the
largest tensor plus per-thread buffers.  Each figure is the median of 3
runs; the kernel-level comparison with the fork's scalar search is
`tq bench weights`."""
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import gguf

ROOT = Path(__file__).resolve().parents[2]
TQ = str(ROOT / "tq")
LAYERS, EMBD, FF, VOCAB = 22, 2048, 5632, 32000


def make(path):
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(LAYERS)
    w.add_embedding_length(EMBD)
    w.add_feed_forward_length(FF)
    w.add_head_count(16)
    base = (rng.standard_t(5, size=(FF, EMBD)) * 0.02).astype(np.float16)  # reused: generation is slow
    emb = np.tile(base, (VOCAB // FF + 1, 1))[:VOCAB]
    w.add_tensor("token_embd.weight", emb)
    w.add_tensor("output_norm.weight", np.ones(EMBD, np.float32))
    w.add_tensor("output.weight", np.roll(emb, 3, axis=1))
    for l in range(LAYERS):
        p = f"blk.{l}."
        for n in ["attn_q", "attn_k", "attn_v", "attn_output"]:
            w.add_tensor(p + n + ".weight", np.roll(base[:EMBD], l + len(n), axis=1))
        w.add_tensor(p + "ffn_gate.weight", np.roll(base, l, axis=0))
        w.add_tensor(p + "ffn_up.weight", np.roll(base, l + 1, axis=0))
        w.add_tensor(p + "ffn_down.weight", np.ascontiguousarray(np.roll(base, l + 2, axis=0).T))
        w.add_tensor(p + "attn_norm.weight", np.ones(EMBD, np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(EMBD, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def run(args, cmd="quantize-tq4"):
    t0 = time.perf_counter()
    pid = subprocess.Popen([TQ, cmd, "-q", *args])
    _, status, ru = os.wait4(pid.pid, 0)
    assert status == 0
    return time.perf_counter() - t0, ru.ru_maxrss * 1024


if len(sys.argv) == 3 and sys.argv[1] == "--make":
    make(sys.argv[2])
    sys.exit(0)

with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as d:
    d = Path(d)
    model = d / "gen-2g-f16.gguf"
    # in another process: ru_maxrss of a child counts the pages it shares with
    # this one between fork and exec, and gguf-py keeps every tensor in memory
    subprocess.run([sys.executable, __file__, "--make", str(model)], check=True)
    size = model.stat().st_size
    largest = VOCAB * EMBD * 2
    slice_bytes = (4 << 20) * 4
    bound = 2 * largest + 3 * slice_bytes
    print(f"model: {size / 2**30:.2f} GiB F16, largest tensor {largest / 2**20:.1f} MiB, {os.cpu_count()} cores")
    for label, args in [("all tensors tq4_1s", ["--policy", "all"]), ("config-i", [])]:
        res = [run([*args, str(model), str(d / "out.gguf")]) for _ in range(3)]
        t = statistics.median(r[0] for r in res)
        rss = max(r[1] for r in res)
        out = (d / "out.gguf").stat().st_size
        print(f"  {label:20s} {t:6.2f} s  {size / t / 1e6:7.1f} MB/s of F16 input  {size / 2 / t / 1e6:6.1f} M weights/s  "
              f"peak RSS {rss / 2**20:6.1f} MiB (bound {bound / 2**20:.0f} MiB)  output {out / 2**30:.2f} GiB")
        assert rss < bound, (rss, bound)
    # rotate-weights: writers whole in float32 plus their encoded copy, the rest in slices
    rbound = 3 * FF * EMBD * 2 + 2 * slice_bytes
    res = [run([str(model), str(d / "rot.gguf")], "rotate-weights") for _ in range(3)]
    t, rss = statistics.median(r[0] for r in res), max(r[1] for r in res)
    print(f"  {'rotate-weights':20s} {t:6.2f} s  {size / t / 1e6:7.1f} MB/s of F16 input  "
          f"peak RSS {rss / 2**20:6.1f} MiB (bound {rbound / 2**20:.0f} MiB)")
    assert rss < rbound, (rss, rbound)
