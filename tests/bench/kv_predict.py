"""kv_predict.py [--session=docs] - would prediction across layers (AQUA-KV) or
from K to V pay on top of transform coding?  A measurement, not a codec (a
benchmark, not a test).  On a long Gemma 3 270M session (tests/bench/
long_sessions.py) decoded losslessly to .npz, per model layer: K turned back
to before RoPE (NeoX pairs, base 1e6 on the global layers, 1e4 on the
others) and centred, V centred; Gaussian rates at one distortion per tensor
(the water level at which the tensor's own eigenbasis needs 3 bits a value):
coding the tensor alone, given the previous model layer's tensor of the same
kind (the best linear prediction: the conditional covariance), and V given
its own layer's K.  The gain is an upper bound: a decoder predicts from
decoded, not exact, values.
TQ_ORACLES/bin/python3 tests/bench/kv_predict.py"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import TQ  # noqa: E402
from long_sessions import session_path  # noqa: E402

OPTS = dict(a.split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
SESSION = OPTS.get("--session", "docs")
ROWS = 8192  # cells sampled for the covariances
GLOBAL = {5, 11, 17}


def turned(k, pos, base, sign):
    """K's NeoX pairs (i, i + d/2) turned by sign x pos x base^(-2i/d): sign -1 takes a
    cached K back to before RoPE, +1 applies RoPE again."""
    d = k.shape[1]
    h = d // 2
    th = pos[:, None] * base ** (-2.0 * np.arange(h) / d)[None, :]
    c, s = np.cos(th), sign * np.sin(th)
    a, b = k[:, :h], k[:, h:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=1)


def pre_rope(k, pos, base):
    return turned(k, pos, base, -1.0)


def rate(lam, theta):
    lam = np.maximum(lam, 0)
    return float(np.sum(np.maximum(0.0, 0.5 * np.log2(np.maximum(lam, 1e-300) / theta)))) / len(lam)


def level(lam, bits):
    lo, hi = np.log2(max(lam.max(), 1e-30)) - 60, np.log2(max(lam.max(), 1e-30))
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rate(lam, 2.0 ** mid) > bits else (lo, mid)
    return 2.0 ** hi


def cond_eig(x, y):
    """Eigenvalues of the covariance of x given y (both centred)."""
    n = len(x)
    sxx, syy, sxy = x.T @ x / n, y.T @ y / n, x.T @ y / n
    c = sxx - sxy @ np.linalg.solve(syy + 1e-9 * np.eye(len(syy)) * np.trace(syy) / len(syy), sxy.T)
    return np.linalg.eigvalsh((c + c.T) / 2)


def main():
    state = session_path(SESSION)
    with tempfile.TemporaryDirectory() as td:
        npz = Path(td) / "s.npz"
        subprocess.run([TQ, "encode-kvdump", state, "--preset", "lossless", "-q", "-o", Path(td) / "s.tqkv"],
                       check=True)
        subprocess.run([TQ, "decode-kvdump", Path(td) / "s.tqkv", "--format", "npz", "-q", "-o", npz], check=True)
        z = np.load(npz)
        n = z["k_0"].shape[0]
        idx = np.linspace(0, n - 1, ROWS).astype(int)
        pos = idx.astype(np.float64)
        K, V = {}, {}
        for layer in range(18):
            k = z[f"k_{layer}"][idx].reshape(ROWS, -1).astype(np.float64)
            v = z[f"v_{layer}"][idx].reshape(ROWS, -1).astype(np.float64)
            k = pre_rope(k, pos, 1e6 if layer in GLOBAL else 1e4)
            K[layer], V[layer] = k - k.mean(0), v - v.mean(0)
    print(f"{SESSION}, {ROWS} of {n} cells: Gaussian bits per value at the distortion where the "
          "tensor alone needs 3\n")
    print("| layer | K alone | K given the previous layer's K | V alone | V given the previous V | "
          "V given this layer's K |")
    print("|---|---|---|---|---|---|")
    tot = np.zeros(5)
    for layer in range(1, 18):
        lk = np.linalg.eigvalsh(K[layer].T @ K[layer] / ROWS)
        lv = np.linalg.eigvalsh(V[layer].T @ V[layer] / ROWS)
        tk, tv = level(lk, 3.0), level(lv, 3.0)
        row = [rate(lk, tk), rate(cond_eig(K[layer], K[layer - 1]), tk), rate(lv, tv),
               rate(cond_eig(V[layer], V[layer - 1]), tv), rate(cond_eig(V[layer], K[layer]), tv)]
        tot += row
        print(f"| {layer} | " + " | ".join(f"{r:.2f}" for r in row) + " |", flush=True)
    print("| mean | " + " | ".join(f"{r / 17:.2f}" for r in tot) + " |")


if __name__ == "__main__":
    main()
