"""kv_vpredict.py [--session=docs] [--bits=2,3,4] - does predicting V from its own layer's
decoded K (the joint K/V coding of issue 22) pay in KL?  A measurement, not a codec (a
benchmark, not a test).  The long Gemma 3 270M session (tests/bench/long_sessions.py) is
encoded with the default preset and decoded: K-hat.  Per model layer, V is predicted from
K-hat turned back to before RoPE (as kv_predict.py) by the least-squares map of the state
itself (V ~ A k + c, A 256 x 256, stored as fp16: counted), and the residual V - (A k + c) is
coded by tq's block codec at b bits (`encode-kvdump` on a NumPy dump of the residuals, every
cell alike, --head-dim 256); against it, V itself coded the same way.  Each V-hat goes into
the state beside K-hat, which is restored in llama.cpp and judged as kv_long.py judges a
snapshot (KL over the floor, 128 teacher-forced steps).  Bits: V's stored bytes (and the maps)
per V value.
TQ_ORACLES/bin/python3 tests/bench/kv_vpredict.py"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import TQ, gemma  # noqa: E402
from long_sessions import open_session  # noqa: E402
from _llama_util import compare  # noqa: E402

ARGV, sys.argv = sys.argv, sys.argv[:1]  # the modules below read their own options when imported
import kv_long  # noqa: E402
from kv_predict import GLOBAL, pre_rope  # noqa: E402
from kv_recent import records  # noqa: E402

sys.argv = ARGV
OPTS = dict(a.split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
SESSION = OPTS.get("--session", "docs")
BITS = [int(b) for b in OPTS.get("--bits", "2,3,4").split(",")]
LAYERS = 18


def model_layer(kv_state, layer):
    """iSWA: cache 0 holds the global layers (5, 11, 17), cache 1 the others in order."""
    return 6 * layer + 5 if kv_state == 0 else layer + layer // 5


def tq(*args):
    subprocess.run([TQ, *map(str, args)], check=True)


def coded_v(d, arrays, bits):
    """arrays {layer: [cells, 256]} through tq at `bits` (V slots of a NumPy dump); the decoded
    arrays and V's stored bytes."""
    z = {}
    for layer in range(LAYERS):
        z[f"k_{layer}"] = np.zeros((len(arrays[0]), 1, 256), dtype=np.float16)
        z[f"v_{layer}"] = arrays[layer].astype(np.float16)[:, None, :]
    np.savez(d / "r.npz", **z)
    tq("encode-kvdump", d / "r.npz", "-q", "-o", d / "r.tqkv", "--head-dim", 256, "--k-bits", 1,
       "--v-bits", bits, "--past-bits", 0)
    info = json.loads(subprocess.run([TQ, "inspect", "--json", d / "r.tqkv"], capture_output=True, text=True,
                                     check=True).stdout)
    vbytes = sum(t["stored_bytes"] for t in info["tensors"] if t["kv"] == "V")
    tq("decode-kvdump", d / "r.tqkv", "-q", "--format", "npz", "-o", d / "r2.npz")
    back = np.load(d / "r2.npz")
    return {layer: back[f"v_{layer}"].reshape(len(arrays[0]), 256).astype(np.float64)
            for layer in range(LAYERS)}, vbytes


def main():
    g = gemma()
    llm, state, cont = open_session(g, SESSION, kv_long.STEPS)
    ref = kv_long.run(llm, state, cont)
    floor = compare(ref, kv_long.run(llm, state, cont, one_by_one=True))[0]
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        tq("encode-kvdump", state, "-q", "-o", d / "s.tqkv", "--model", g)
        tq("decode-kvdump", d / "s.tqkv", "-q", "-o", d / "s.ggsn")
        kl_default = compare(ref, kv_long.run(llm, d / "s.ggsn", cont))[0]
        recs = records(d / "s.tqkv")
        exact, khat = state.read_bytes(), (d / "s.ggsn").read_bytes()
        V, K = {}, {}
        vplace = {}
        for off, size, cells, kv_state, is_v in recs:
            layer = model_layer(kv_state, [r for r in recs if r[3] == kv_state and r[4] == is_v].index(
                (off, size, cells, kv_state, is_v)))
            rows = lambda b: np.frombuffer(b, np.float16, size // 2, off).reshape(cells, -1).astype(np.float64)
            if is_v:
                V[layer], vplace[layer] = rows(exact), (off, size)
            else:
                base = 1e6 if layer in GLOBAL else 1e4
                K[layer] = pre_rope(rows(khat), np.arange(cells, dtype=np.float64), base)
        n = len(V[0])
        pred, resid = {}, {}
        for layer in range(LAYERS):
            x = np.hstack([K[layer], np.ones((n, 1))])
            coef = np.linalg.lstsq(x, V[layer], rcond=None)[0].astype(np.float16).astype(np.float64)
            pred[layer] = x @ coef
            resid[layer] = V[layer] - pred[layer]
        share = sum((resid[la] ** 2).sum() for la in V) / sum(((V[la] - V[la].mean(0)) ** 2).sum() for la in V)
        map_bits = LAYERS * 257 * 256 * 16 / (LAYERS * n * 256)
        print(f"{SESSION}: floor {floor:.5f}; default snapshot KL {kl_default:.5f} ({kl_default / floor:.2f}x); "
              f"the residual holds {share:.1%} of V's centred energy; the maps cost {map_bits:.3f} bits per V value\n")
        print("| V coded | tq bits | V bits per value | KL (K from the default snapshot) | x floor |")
        print("|---|---|---|---|---|")
        for bits in BITS:
            for label, src, extra in (("itself", V, None), ("residual of A k-hat + c", resid, pred)):
                dec, vbytes = coded_v(d, src, bits)
                out = bytearray(khat)
                for layer, (off, size) in vplace.items():
                    vh = dec[layer] + (extra[layer] if extra else 0)
                    out[off : off + size] = vh.astype(np.float16).tobytes()
                (d / "y.ggsn").write_bytes(bytes(out))
                kl = compare(ref, kv_long.run(llm, d / "y.ggsn", cont))[0]
                vb = 8 * vbytes / (LAYERS * n * 256) + (map_bits if extra else 0)
                print(f"| {label} | {bits} | {vb:.3f} | {kl:.5f} | {kl / floor:.2f} |", flush=True)


if __name__ == "__main__":
    main()
