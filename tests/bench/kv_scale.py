"""kv_scale.py [--copies=27] - a state past 4 GiB through tq (a benchmark, not a test): the K/V
rows of SmolLM2-135M's real 7,168-token session (tests/bench/long_sessions.py --model smollm2)
laid end to end `copies` times into one session file of 30 layers x 193,536 cells (4.46 GB;
positions run on, so llama.cpp would not take it: this measures the file path), then
  tq encode-kvdump --preset lossless, decode, cmp        (byte-identical)
  tq encode-kvdump --model (the default preset), decode  (and the K/V error)
  zstd -3 -T2 and zstd -d on the same file
with wall times and each tq run's peak anonymous memory (tests/bench/kv_long_speed.py's
sampling).  Needs about 3 x the state's size on disk (TQ_BENCH_DIR, default build/).
TQ_ORACLES/bin/python3 tests/bench/kv_scale.py"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import ROOT, TQ, need, smollm2  # noqa: E402

np = need("numpy")
from kv_long_speed import run  # noqa: E402  (wall seconds, peak RssAnon MB)
from long_sessions import session_path  # noqa: E402

OPTS = dict(a.split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
COPIES = int(OPTS.get("--copies", 27))
LAYERS, WIDTH = 30, 192


def tiled(src, out, copies):
    """The session at src (one stream, f16, v_trans 0) with its rows repeated `copies` times."""
    raw = Path(src).read_bytes()
    cells = int(np.frombuffer(raw, "<u4", 1, 8)[0])
    off = 12 + 4 * cells
    name_len = int(np.frombuffer(raw, "<u4", 1, off)[0])
    arch = raw[off + 4 : off + 4 + name_len]
    off += 4 + name_len + 8 + 12 * cells + 8  # one stream, the cells, v_trans, the layer count
    n = cells * copies
    with open(out, "wb") as f:
        f.write(np.array([0x6767736E, 10, n], "<u4").tobytes())
        f.write((np.arange(n, dtype="<i4") % 32000).astype("<i4").tobytes())
        f.write(np.array([name_len], "<u4").tobytes() + arch + np.array([1, n], "<u4").tobytes())
        meta = np.zeros((n, 3), "<i4")
        meta[:, 0] = np.arange(n)
        meta[:, 1] = 1
        f.write(meta.tobytes())
        f.write(np.array([0, LAYERS], "<u4").tobytes())
        for _ in range(2 * LAYERS):
            head = raw[off : off + 12]
            rows = raw[off + 12 : off + 12 + 2 * WIDTH * cells]
            off += 12 + 2 * WIDTH * cells
            f.write(head)
            for _ in range(copies):
                f.write(rows)
    return n


def main():
    m = smollm2()
    src = session_path("docs", model="smollm2")
    if not src.exists():
        raise SystemExit(f"{src} not found: python3 tests/bench/long_sessions.py --model smollm2")
    base = Path(os.environ.get("TQ_BENCH_DIR", str(ROOT / "build")))
    with tempfile.TemporaryDirectory(dir=base) as td:
        d = Path(td)
        state = d / "big.ggsn"
        n = tiled(src, state, COPIES)
        size = state.stat().st_size
        print(f"# A state past 4 GiB\n\n`python3 tests/bench/kv_scale.py --copies={COPIES}`: SmolLM2's "
              f"7,168-token session's rows {COPIES} times, {n} cells, {size / 1e9:.2f} GB ({size / 2**30:.2f} GiB)\n")
        print("| step | seconds | peak anon MB | output MB |\n|---|---|---|---|")

        def step(label, cmd, out):
            wall, peak = run([str(a) for a in cmd])
            print(f"| {label} | {wall:.1f} | {peak:.0f} | {Path(out).stat().st_size / 1e6:.0f} |", flush=True)

        step("tq encode --preset lossless", [TQ, "encode-kvdump", state, "-q", "-o", d / "l.tqkv", "--preset",
                                               "lossless"], d / "l.tqkv")
        step("tq decode (lossless)", [TQ, "decode-kvdump", d / "l.tqkv", "-q", "-o", d / "l.ggsn"], d / "l.ggsn")
        same = subprocess.run(["cmp", state, d / "l.ggsn"]).returncode == 0
        os.unlink(d / "l.ggsn")
        os.unlink(d / "l.tqkv")
        step("tq encode --model (balanced)", [TQ, "encode-kvdump", state, "-q", "-o", d / "b.tqkv", "--model", m],
             d / "b.tqkv")
        step("tq decode (balanced)", [TQ, "decode-kvdump", d / "b.tqkv", "-q", "-o", d / "b.ggsn"], d / "b.ggsn")
        err = subprocess.run([str(ROOT / "build" / "tests" / "kv-error"), state, d / "b.ggsn"],
                             capture_output=True, text=True).stdout.strip()
        os.unlink(d / "b.ggsn")
        step("zstd -3 -T2", ["zstd", "-q", "-f", "-3", "-T2", state, "-o", d / "z.zst"], d / "z.zst")
        step("zstd -d", ["zstd", "-q", "-f", "-d", d / "z.zst", "-o", d / "z.ggsn"], d / "z.ggsn")
        print(f"\nlossless round trip byte-identical: {'yes' if same else 'NO'}; balanced: {err}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
