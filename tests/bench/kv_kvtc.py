"""kv_kvtc.py [--bits=1,2,3] [--sessions=docs,code] - a KVTC-like baseline for the long-context
rate-distortion curve (a benchmark, not a test; after KVTC, arXiv 2511.01815, in our own words):
each long Gemma 3 270M session (tests/bench/long_sessions.py) coded with bases calibrated on the
*other* session (a per-model calibration from another text), per layer K turned back to before
RoPE (NeoX pairs, base 1e6 on the global layers, 1e4 on the others, as kv_predict.py) and V,
each centred by the calibration's mean and projected on the calibration's eigenvectors; bits per
component allocated by greedy marginal return (for these convex costs what KVTC's dynamic
programme finds) at `bits` a value before entropy coding; each coefficient quantized by the
uniform quantizer of least error for a Gaussian of the component's calibrated spread (a step
and midpoints; values beyond its 2^b cells are not clipped but take further cells: K's
outliers clipped at 3 bits restored at 5x the floor), indices as int16, component by
component, DEFLATE (zlib level 6) per tensor; the first 4 and the last
128 cells kept in f16, as KVTC keeps them.  Bits per value: the compressed indices and the kept
cells over every K/V value (the bases are the model's, not counted).  Restored in llama.cpp and
judged as tests/bench/kv_long.py judges tq (KL over the floor, 128 teacher-forced steps); prints
rows in kv_long.py's table form, so `kv_long.py --rows-from` can draw them beside tq's.
TQ_ORACLES/bin/python3 tests/bench/kv_kvtc.py --bits=1,2,3"""
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import TQ, gemma  # noqa: E402
from long_sessions import session_path  # noqa: E402
from _llama_util import compare  # noqa: E402
import llama_cpp  # noqa: E402

ARGV, sys.argv = sys.argv, sys.argv[:1]  # the modules below read their own options when imported
import kv_long  # noqa: E402
from kv_predict import pre_rope, turned  # noqa: E402
from kv_recent import records  # noqa: E402

sys.argv = ARGV
OPTS = dict(a.split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
BITS = [float(b) for b in OPTS.get("--bits", "1,2,3").split(",")]
SESSIONS = OPTS.get("--sessions", "docs,code").split(",")
SINKS, RECENT = 4, 128
# the least-error uniform quantizer of a unit Gaussian with 2^b levels: its step and its error
# (Max 1960), b = 1..8
STEP = [0, 1.596, 0.9957, 0.5860, 0.3352, 0.1881, 0.1041, 0.0569, 0.0308]
ERR = [1.0, 0.3634, 0.1188, 0.03744, 0.01154, 0.003490, 0.001035, 0.0003042, 0.0000887]


def rope_base(kv_state):
    return 1e6 if kv_state == 0 else 1e4  # state 0: the global layers' cache (iSWA)


def allocate(lam, budget):
    """Bits per component (0..8), `budget` in all, each next bit where it removes the most error."""
    b = np.zeros(len(lam), dtype=int)
    for _ in range(int(round(budget))):
        gain = np.where(b < 8, lam * (np.take(ERR, b) - np.take(ERR, np.minimum(b + 1, 8))), -1)
        b[int(np.argmax(gain))] += 1
    return b


def rows_of(state, rec):
    off, size, cells, _, _ = rec
    return np.frombuffer(state, dtype=np.float16, count=size // 2, offset=off).reshape(cells, -1)


def prepared(x, kv_state, is_v):
    x = x.astype(np.float64)
    return x if is_v else pre_rope(x, np.arange(len(x), dtype=np.float64), rope_base(kv_state))


def code_tensor(x, cal, kv_state, is_v, bits):
    """x [cells, d] f16 rows, cal the calibration's; (decoded rows f16, compressed bytes)."""
    c = prepared(cal, kv_state, is_v)
    mean = c.mean(0)
    lam, vec = np.linalg.eigh(np.cov((c - mean).T))
    lam, vec = np.maximum(lam[::-1], 0), vec[:, ::-1]
    alloc = allocate(lam, bits * len(lam))
    keep = alloc > 0
    y = (prepared(x, kv_state, is_v) - mean) @ vec[:, keep]  # [cells, stored components]
    sd = np.sqrt(lam[keep])
    step = np.take(STEP, alloc[keep]) * sd
    q = np.floor(y / step)
    body = q[SINKS : len(x) - RECENT].T.astype(np.int16)  # component by component
    nbytes = len(zlib.compress(body.tobytes(), 6)) + (SINKS + RECENT) * x.shape[1] * 2
    back = ((q + 0.5) * step) @ vec[:, keep].T + mean
    if not is_v:
        back = turned(back, np.arange(len(x), dtype=np.float64), rope_base(kv_state), 1.0)
    out = back.astype(np.float16)
    out[:SINKS] = x[:SINKS]
    out[len(x) - RECENT :] = x[len(x) - RECENT :]
    return out, nbytes


def main():
    g = gemma()
    llm = llama_cpp.Llama(model_path=str(g), n_ctx=32768, n_batch=512, logits_all=False, verbose=False,
                          flash_attn=True)
    path = {s: session_path(s) for s in ("docs", "code")}
    other = {"docs": "code", "code": "docs"}
    rows, floors = {}, {}
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        subprocess.run([TQ, "encode-kvdump", path["docs"], "-q", "--preset", "lossless", "-o", d / "l.tqkv"],
                       check=True)
        recs = records(d / "l.tqkv")  # the tensors' places: both sessions have the same layout
        for sess in SESSIONS:
            src, cal = path[sess].read_bytes(), path[other[sess]].read_bytes()
            cont = np.load(path[sess].with_suffix(".cont.npy")).tolist()[: kv_long.STEPS]
            ref = kv_long.run(llm, path[sess], cont)
            floors[sess] = compare(ref, kv_long.run(llm, path[sess], cont, one_by_one=True))[0]
            values = sum(r[1] // 2 for r in recs)
            for bits in BITS:
                out = bytearray(src)
                total = 0
                for rec in recs:
                    off, size, _, kv_state, is_v = rec
                    dec, n = code_tensor(rows_of(src, rec), rows_of(cal, rec), kv_state, is_v, bits)
                    out[off : off + size] = dec.tobytes()
                    total += n
                (d / "y.ggsn").write_bytes(bytes(out))
                kl, top1 = compare(ref, kv_long.run(llm, d / "y.ggsn", cont))
                name = f"KVTC-like/{bits:g} b"
                rows.setdefault(name, {})[sess] = (8 * total / values, kl, top1)
                print(f"{sess} {name}: {8 * total / values:.3f} bits, KL {kl:.5f} "
                      f"({kl / floors[sess]:.2f}x floor), top-1 {top1:.3f}", flush=True)
    print(f"\n{kv_long.TOKENS} tokens, {kv_long.STEPS} teacher-forced steps; floor (one token a call): "
          + ", ".join(f"{s} {floors[s]:.5f}" for s in SESSIONS) + "\n")
    print("| setting | switches | bits per K/V value | mean KL | x floor | top-1 |")
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        f = lambda i, fmt: " / ".join(fmt.format(r[s][i]) for s in SESSIONS)
        xf = " / ".join(f"{r[s][1] / floors[s]:.2f}" for s in SESSIONS)
        print(f"| {name} | `kv_kvtc.py --bits={name.split('/')[1][:-2]}` | {f(0, '{:.3f}')} | "
              f"{f(1, '{:.5f}')} | {xf} | {f(2, '{:.1%}')} |")


if __name__ == "__main__":
    main()
