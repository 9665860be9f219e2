"""Benchmark (not a test): tq encode-kvdump / decode-kvdump beside the tool a
user would reach for instead, zstd, on the same 325 MB f16 session (32 layers,
8 KV heads x 128, 2479 cells; Gaussian K/V with a few large channels, made
here).  Compared in one run, interleaved, medians of 5 wall times, all files
on the same disk:
  tq encode-kvdump S -o X.tqkv --head-dim 128       vs  zstd -3 -T2 S -o S.zst
  tq decode-kvdump X.tqkv -o S2 (not fsync'd)       vs  zstd -d S.zst -o S3
  tq decode-kvdump X.tqkv -o S2 --fsync             (for the record)
zstd's outputs are not fsync'd either.  Prints sizes, seconds and the
tq/zstd ratios.  python3 tests/bench/kv_vs_zstd.py [more encode-kvdump switches]"""
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oracle"))
from _sessions import write_session  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TQ = str(ROOT / "tq")
LAYERS, WIDTH, CELLS = 32, 1024, 2479
REPS = 5
EXTRA = sys.argv[1:]  # more encode-kvdump switches, e.g. --cells uniform


def wall(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


with tempfile.TemporaryDirectory(dir=os.environ.get("TQ_BENCH_DIR", str(ROOT / "build"))) as d:
    d = Path(d)
    s = d / "s.ggsn"
    write_session(s, LAYERS, WIDTH, CELLS, outlier_channels=24)
    cmds = {
        "tq encode": [TQ, "encode-kvdump", s, "-o", d / "x.tqkv", "--head-dim", 128, "-q", *EXTRA],
        "zstd -3 -T2": ["zstd", "-q", "-f", "-3", "-T2", s, "-o", d / "s.zst"],
        "tq decode": [TQ, "decode-kvdump", d / "x.tqkv", "-o", d / "s2.ggsn", "-q"],
        "zstd -d": ["zstd", "-q", "-f", "-d", d / "s.zst", "-o", d / "s3.ggsn"],
        "tq decode --fsync": [TQ, "decode-kvdump", d / "x.tqkv", "-o", d / "s4.ggsn", "-q", "--fsync"],
    }
    cmds = {k: [str(a) for a in v] for k, v in cmds.items()}
    for c in cmds.values():  # warm-up, and the files the later commands read
        wall(c)
    times = {k: [] for k in cmds}
    for _ in range(REPS):
        for k, c in cmds.items():
            times[k].append(wall(c))
    med = {k: statistics.median(v) for k, v in times.items()}
    size = s.stat().st_size
    print(f"session {size / 1e6:.1f} MB ({LAYERS} layers x {WIDTH} x {CELLS} cells, f16); "
          f"tq balanced{' ' + ' '.join(EXTRA) if EXTRA else ''} {(d / 'x.tqkv').stat().st_size / 1e6:.1f} MB, zstd -3 {(d / 's.zst').stat().st_size / 1e6:.1f} MB")
    for k in cmds:
        print(f"  {k:20s} median {med[k]:.3f} s  ({size / med[k] / 1e9:.2f} GB/s; runs {' '.join(f'{t:.2f}' for t in times[k])})")
    print(f"ratios (tq / zstd, lower is faster): encode {med['tq encode'] / med['zstd -3 -T2']:.2f}, "
          f"decode {med['tq decode'] / med['zstd -d']:.2f}, decode with --fsync {med['tq decode --fsync'] / med['zstd -d']:.2f}")
    sys.exit(0)
