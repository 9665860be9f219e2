"""Benchmark (not a test): `tq inspect` on large GGUF files.

1. An 8.6 GB sparse GGUF (64 Q8_0 tensors of 134 MB, data never written):
   median wall time of `tq inspect` over 9 runs, and how much of the file is
   resident in the page cache afterwards (mmap: only the header pages should
   be touched).
2. A 1 GiB F16 GGUF with real data: `tq inspect --stats` throughput in GB/s
   of tensor data, next to NumPy reading the same mapped bytes (a memory
   bandwidth reference on this machine).
Needs numpy and gguf (pip); prints a small report."""
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import gguf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import timed  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TQ = str(ROOT / "tq")


def header_only(path, tensors):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("llama.block_count", len(tensors))
    total = 0
    for name, shape, qt, nbytes in tensors:
        w.add_tensor_info(name, shape, np.dtype(np.uint8), nbytes, raw_dtype=qt)
        total += (nbytes + 31) // 32 * 32
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    return total


def resident_bytes(path):
    try:
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                             check=True, capture_output=True, text=True).stdout.split()
        return int(out[0])
    except Exception:
        return None


with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as d:
    d = Path(d)
    big = d / "sparse8g.gguf"
    q8 = gguf.GGMLQuantizationType.Q8_0
    rows, cols = 4096, 30720  # 125,829,120 values -> 133,693,440 bytes of Q8_0
    tensors = [(f"blk.{i}.ffn_up.weight", (rows, cols // 32 * 34), q8, rows * cols // 32 * 34) for i in range(64)]
    data = header_only(big, tensors)
    hdr = big.stat().st_size
    off = (hdr + 31) // 32 * 32
    with open(big, "r+b") as f:
        f.truncate(off + data)
    size = big.stat().st_size
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        dropped = True
    except OSError:
        dropped = False
    subprocess.run([TQ, "inspect", str(big)], check=True, stdout=subprocess.DEVNULL)
    res = resident_bytes(big)
    t = timed([TQ, "inspect", str(big)], reps=9)
    print(f"sparse GGUF: {size / 1e9:.2f} GB, 64 tensors, header {hdr} bytes")
    print(f"  tq inspect: median {t * 1000:.1f} ms over 9 runs (process start included)")
    if res is not None:
        print(f"  resident after one inspect{' (page cache dropped first)' if dropped else ''}: {res} bytes")

    f16 = d / "f16.gguf"
    n_t, rows, cols = 8, 8192, 8192  # 8 x 64M values x 2 bytes = 1 GiB
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(f16), "llama")
    for i in range(n_t):
        w.add_tensor_info(f"t{i}.weight", (rows, cols), np.dtype(np.float16), rows * cols * 2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    with open(f16, "ab") as f:
        f.write(b"\0" * ((-f.tell()) % 32))
        for i in range(n_t):
            for r in range(0, rows, 1024):
                f.write(rng.standard_normal((1024, cols), dtype=np.float32).astype(np.float16).tobytes())
    subprocess.run([TQ, "inspect", "--stats", str(f16)], check=True, stdout=subprocess.DEVNULL)  # warm cache
    for threads in (1, 0):
        t = timed([TQ, "inspect", "--stats", "--threads", str(threads), str(f16)])
        print(f"--stats on 1.07 GB of f16, {'all' if not threads else threads} thread(s): "
              f"median {t:.2f} s = {n_t * rows * cols * 2 / t / 1e9:.2f} GB/s (process start included)")
    mm = np.memmap(f16, dtype=np.uint8, mode="r")
    t0 = time.perf_counter()
    for _ in range(3):
        s = int(mm[::64].sum())  # touches every cache line once
    t = (time.perf_counter() - t0) / 3
    print(f"reference: one read pass over the mapped file {mm.size / t / 1e9:.2f} GB/s (numpy, one thread)")
