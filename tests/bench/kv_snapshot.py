"""Benchmark (not a test): encode-kvdump / decode-kvdump throughput on a
generated 1 GiB session file (32 layers, 8 KV heads x 128, 8192 cells, f16,
Gaussian K/V), on all cores, against copying the file.  Figures are GB/s of
f16 K/V data; each is the median of 3 runs.  Decode is timed twice: into a
file (fsync'd before the rename, so bounded by the disk like the copy) and to
a pipe into /dev/null (the decoder alone: checksums, zstd, codec, f16)."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oracle"))
from _sessions import write_session  # noqa: E402
from _timing import timed  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TQ = str(ROOT / "tq")
LAYERS, WIDTH, CELLS = 32, 1024, 8192


def write_state(path):
    return write_session(path, LAYERS, WIDTH, CELLS)


with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as d:
    d = Path(d)
    state = d / "big.ggsn"
    kv = write_state(state)
    size = state.stat().st_size
    print(f"state: {size / 2**30:.2f} GiB, {kv / 1e9:.2f} GB of f16 K/V, {os.cpu_count()} cores")
    t = timed(["cp", str(state), str(d / "copy.ggsn")])
    print(f"  cp (file copy)          {t:6.2f} s  {kv / t / 1e9:6.2f} GB/s")
    t = timed(["dd", f"if={state}", f"of={d / 'copy.ggsn'}", "bs=4M", "conv=fsync", "status=none"])
    print(f"  copy + fsync (dd)       {t:6.2f} s  {kv / t / 1e9:6.2f} GB/s   (tq fsyncs its output before renaming)")
    for preset in ["lossless", "balanced"]:
        snap = d / f"{preset}.tqkv"
        te = timed([TQ, "encode-kvdump", str(state), "-o", str(snap), "--preset", preset, "--head-dim", "128",
                    "--fsync"])
        td = timed([TQ, "decode-kvdump", str(snap), "-o", str(d / "back.ggsn"), "--fsync"])
        tn = timed([TQ, "decode-kvdump", str(snap), "-o", "-"], reps=5)
        bpv = snap.stat().st_size * 8 / (kv / 2)
        print(f"  {preset:9s} encode      {te:6.2f} s  {kv / te / 1e9:6.2f} GB/s   ({bpv:.3f} bits/value, "
              f"{size / snap.stat().st_size:.2f}x)")
        print(f"  {preset:9s} decode      {td:6.2f} s  {kv / td / 1e9:6.2f} GB/s   (to a file)")
        print(f"  {preset:9s} decode      {tn:6.2f} s  {kv / tn / 1e9:6.2f} GB/s   (to /dev/null: the decoder alone)")
