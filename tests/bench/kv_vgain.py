"""kv_vgain.py [--session=docs] [--steps=512] - one quantizer step for every V row, or every
row at unit norm with its gain?  A measurement, not a codec (a benchmark, not a test), that
decided the V transform's gains (formats/tqkv/TQKV.md, "Transform coding").  SmolLM2-135M's session
(tests/bench/long_sessions.py --model smollm2) is encoded with `--preset small --v-rate 0`
(V in tq's blocks) and decoded: K-hat.  Per layer and KV head, V past its first cell is
centred, optionally scaled to unit norm (the gain coded as tq codes it: a byte in steps of
2^(1/8)), projected on the eigenvectors of its covariance and rounded with one step (a share of
the components' mean spread); V's bits are the indices' entropy (and the gains'), bases not
counted.  Each V-hat goes into the state beside K-hat, restored in llama.cpp and judged as
kv_long.py judges a snapshot (KL over the floor, teacher-forced steps).
TQ_ORACLES/bin/python3 tests/bench/kv_vgain.py"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
OPTS = dict(a.split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
SESSION = OPTS.get("--session", "docs")
STEPS = int(OPTS.get("--steps", 512))
sys.argv = sys.argv[:1] + ["--model=smollm2", f"--steps={STEPS}"]  # kv_long reads its own
import kv_long  # noqa: E402
from kv_recent import records  # noqa: E402
from long_sessions import open_session  # noqa: E402
from _env import TQ, smollm2  # noqa: E402
from _llama_util import compare  # noqa: E402

HEAD = 64


def entropy(q):
    _, c = np.unique(q, return_counts=True)
    p = c / c.sum()
    return -(p * np.log2(p)).sum()


def v_hat(x, mode, step):
    """Rows x[cells][width] coded as the docstring says; (rows, bits summed over values)."""
    rec, bits = x.copy(), 0.0
    for h in range(x.shape[1] // HEAD):
        xs = x[1:, h * HEAD : (h + 1) * HEAD]
        mu = xs.mean(0)
        xc = xs - mu
        if mode == "gain":
            code = np.clip(np.round(8 * np.log2(np.maximum(np.linalg.norm(xc, axis=1), 1e-30))), -127, 127)
            g = 2.0 ** (code / 8)
            bits += entropy(code) * len(xc)
        else:
            g = np.full(len(xc), np.sqrt((xc**2).sum(1).mean()))
        u = xc / g[:, None]
        _, basis = np.linalg.eigh(np.cov(u.T))
        s = step / np.sqrt(HEAD)
        q = np.round(u @ basis / s)
        bits += sum(entropy(q[:, c]) for c in range(HEAD)) * len(q)
        rec[1:, h * HEAD : (h + 1) * HEAD] = (q * s) @ basis.T * g[:, None] + mu
    return rec, bits


def main():
    g = smollm2()
    llm, state, cont = open_session(g, SESSION, STEPS, model="smollm2", n_batch=max(512, STEPS + 1))
    ref = kv_long.run(llm, state, cont)
    floor = compare(ref, kv_long.run(llm, state, cont, one_by_one=True))[0]
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        subprocess.run([TQ, "encode-kvdump", "-q", "--preset", "small", "--v-rate", "0", "--model", g, state,
                        "-o", d / "s.tqkv"], check=True)
        subprocess.run([TQ, "decode-kvdump", "-q", d / "s.tqkv", "-o", d / "s.ggsn"], check=True)
        kl = compare(ref, kv_long.run(llm, d / "s.ggsn", cont))[0]
        print(f"{SESSION}, {STEPS} steps: floor {floor:.5f}; V in tq's 3-bit blocks (small): KL {kl:.5f} "
              f"({kl / floor:.2f}x)\n")
        print("| V | step | V bits per value | KL | x floor |\n|---|---|---|---|---|")
        exact, khat = state.read_bytes(), (d / "s.ggsn").read_bytes()
        vs = [(off, size, cells) for off, size, cells, _, is_v in records(d / "s.tqkv") if is_v]
        for mode in ("one step", "gain"):
            for step in (0.5, 0.6, 0.7):
                out, bits, n = bytearray(khat), 0.0, 0
                for off, size, cells in vs:
                    x = np.frombuffer(exact, np.float16, size // 2, off).reshape(cells, -1).astype(np.float64)
                    rec, b = v_hat(x, mode, step)
                    out[off : off + size] = rec.astype(np.float16).tobytes()
                    bits += b
                    n += (cells - 1) * x.shape[1]
                (d / "y.ggsn").write_bytes(bytes(out))
                kl = compare(ref, kv_long.run(llm, d / "y.ggsn", cont))[0]
                print(f"| {mode} | {step} | {bits / n:.3f} | {kl:.5f} | {kl / floor:.2f} |", flush=True)


if __name__ == "__main__":
    main()
