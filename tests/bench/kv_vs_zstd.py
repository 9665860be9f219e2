"""Benchmark (not a test): tq encode-kvdump / decode-kvdump beside the tool a
user would reach for instead, zstd, on the same 325 MB f16 session of a
Llama-8B-shaped KV (32 layers, 8 KV heads x 128, 2479 cells; Gaussian K/V with
a few large channels, made here), without and with a model of that shape
(random weights, made here: RoPE, GQA 32/8).  Compared in one run,
interleaved, medians of --reps wall times, all files on the same disk:
  tq encode-kvdump S -o X.tqkv --head-dim 128        vs  zstd -3 -T2 S -o S.zst
  tq encode-kvdump S -o Y.tqkv --model M
  tq decode-kvdump X.tqkv -o S2 (not fsync'd)        vs  zstd -d S.zst -o S3
  tq decode-kvdump Y.tqkv -o S4 --model M
zstd's outputs are not fsync'd either.  Then what `--transform auto` chose
against `--transform off`: file sizes and K's and V's relative squared error,
so that auto is seen never to take a coding that is larger and worse.
Prints a markdown report (tests/bench/results/kv_vs_zstd.md).
python3 tests/bench/kv_vs_zstd.py [--reps N] [more encode-kvdump switches]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oracle"))
from _env import need  # noqa: E402

np = need("numpy")
from _models import make_model  # noqa: E402
from _sessions import write_session  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TQ = str(ROOT / "tq")
LAYERS, WIDTH, CELLS = 32, 1024, 2479


def wall(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def kv_arrays(path):
    """K and V of a session written by _sessions.write_session ([layers][cells][width] f32)."""
    raw = Path(path).read_bytes()
    off = 12 + 4 * CELLS
    off += 4 + int(np.frombuffer(raw, "<u4", 1, off)[0])  # the architecture's name
    off += 8 + 12 * CELLS + 8  # cells' metadata, then v_trans and the layer count
    out = []
    for _ in range(2 * LAYERS):
        off += 12
        out.append(np.frombuffer(raw, "<f2", CELLS * WIDTH, off).reshape(CELLS, WIDTH).astype(np.float32))
        off += 2 * CELLS * WIDTH
    return np.stack(out[:LAYERS]), np.stack(out[LAYERS:])


def rel_err(a, b):
    return float(((a - b) ** 2).sum() / (a ** 2).sum())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    args, extra = ap.parse_known_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("TQ_BENCH_DIR", str(ROOT / "build"))) as d:
        d = Path(d)
        s, m = d / "s.ggsn", d / "m.gguf"
        write_session(s, LAYERS, WIDTH, CELLS, outlier_channels=24)
        make_model(m, None, 128, n_head=32, n_head_kv=8, n_layer=LAYERS, n_embd=256, n_ff=256)
        cmds = {
            "tq encode": [TQ, "encode-kvdump", s, "-o", d / "x.tqkv", "--head-dim", 128, "-q", *extra],
            "tq encode --model": [TQ, "encode-kvdump", s, "-o", d / "y.tqkv", "--model", m, "-q", *extra],
            "zstd -3 -T2": ["zstd", "-q", "-f", "-3", "-T2", s, "-o", d / "s.zst"],
            "tq decode": [TQ, "decode-kvdump", d / "x.tqkv", "-o", d / "s2.ggsn", "-q"],
            "tq decode --model": [TQ, "decode-kvdump", d / "y.tqkv", "-o", d / "s4.ggsn", "--model", m, "-q"],
            "zstd -d": ["zstd", "-q", "-f", "-d", d / "s.zst", "-o", d / "s3.ggsn"],
        }
        cmds = {k: [str(a) for a in v] for k, v in cmds.items()}
        for c in cmds.values():  # warm-up, and the files the later commands read
            wall(c)
        times = {k: [] for k in cmds}
        for _ in range(args.reps):
            for k, c in cmds.items():
                times[k].append(wall(c))
        med = {k: statistics.median(v) for k, v in times.items()}
        size = s.stat().st_size
        print(f"# tq beside zstd on a Llama-8B-shaped KV\n\n`python3 tests/bench/kv_vs_zstd.py "
              f"--reps {args.reps}{' ' + ' '.join(extra) if extra else ''}`: session {size / 1e6:.1f} MB "
              f"({LAYERS} layers x {WIDTH} x {CELLS} cells, f16), medians of {args.reps} interleaved runs\n")
        print("| command | median s | runs |\n|---|---|---|")
        for k in cmds:
            print(f"| {k} | {med[k]:.3f} | {' '.join(f'{t:.2f}' for t in times[k])} |")
        print(f"\nratios (tq / zstd, lower is faster): encode {med['tq encode'] / med['zstd -3 -T2']:.2f}, "
              f"encode --model {med['tq encode --model'] / med['zstd -3 -T2']:.2f}, "
              f"decode {med['tq decode'] / med['zstd -d']:.2f}, "
              f"decode --model {med['tq decode --model'] / med['zstd -d']:.2f}\n")
        k0, v0 = kv_arrays(s)
        print("| encode | transform | file MB | K tensors transformed | K bits per value (bases in) | "
              "K rel. error | V rel. error |\n|---|---|---|---|---|---|---|")
        loss = []
        for label, more in (("without a model", ["--head-dim", "128"]), ("--model", ["--model", str(m)])):
            for tc in ("auto", "off", "on"):
                out, dec = d / f"t-{tc}.tqkv", d / f"t-{tc}.ggsn"
                subprocess.run([TQ, "encode-kvdump", str(s), "-o", str(out), "-q", "--transform", tc, *more, *extra],
                               check=True)
                dec_more = ["--model", str(m)] if label == "--model" else []
                subprocess.run([TQ, "decode-kvdump", str(out), "-o", str(dec), "-q", *dec_more], check=True)
                k1, v1 = kv_arrays(dec)
                info = json.loads(subprocess.run([TQ, "inspect", "--json", str(out)], check=True,
                                                 capture_output=True, text=True).stdout)
                ks = [t for t in info["tensors"] if t["kv"] == "K"]
                k_bits = sum(8 * (t["stored_bytes"] + t.get("basis_bytes", 0)) for t in ks) / (LAYERS * CELLS * WIDTH)
                n_klt = sum(t["codec"] == "klt" for t in ks)
                if tc == "on":
                    dry = subprocess.run([TQ, "encode-kvdump", str(s), "--dry-run", "--json", "--transform", tc,
                                          *more, *extra], check=True, capture_output=True, text=True).stdout
                    codec = json.loads(dry)["tensors"][0]["codec"]  # klt(g=..,m=..,R.RRb,..)
                    rate = float(codec.split(",")[2].rstrip("b"))
                    idx = sum(8 * t["stored_bytes"] for t in ks) / (LAYERS * CELLS * WIDTH)
                    loss.append(f"{label}: indices {idx:.3f} bits at a planned rate of {rate:.3f}")
                print(f"| {label} | {tc} | {out.stat().st_size / 1e6:.2f} | {n_klt} of {LAYERS} | {k_bits:.3f} | "
                      f"{rel_err(k0, k1):.5f} | {rel_err(v0, v1):.5f} |")
        print("\nThe transform's indices as zstd codes them against the entropy the plan aimed at "
              "(formats/snapshot/kv_klt.c KLT_CODER_LOSS): " + "; ".join(loss))


if __name__ == "__main__":
    main()
