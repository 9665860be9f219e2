"""Measurement (not a test): does InnerQ equalization help tq's codec on the
stories260K fixture?  Scales are calibrated the fork's way (per channel of
the head: (mean RMS / RMS)^0.5, clamped to [0.5, 2]) from the fixture's own
K/V, pooled over K and V or separately, then the snapshot is restored in
llama.cpp with 127 teacher-forced steps and compared with the uncompressed
restore (mean KL, top-1)."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import llama_cpp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "oracle"))
from _llama_util import compare, continuation_logits  # noqa: E402

SHARED = Path(os.environ.get("TQ_SHARED") or ROOT.parent / "shared")
FIX, M, TQ = SHARED / "fixtures" / "llama-state", str(SHARED / "models" / "stories260K.gguf"), str(ROOT / "tq")
CONT = np.fromfile(FIX / "p1.cont.tok", dtype=np.int32).tolist()[:127]


def tq(*a):
    subprocess.run([TQ, *map(str, a)], check=True)


def restorable(src, dst):
    b = bytearray(Path(src).read_bytes())
    b[4:8] = int(llama_cpp.LLAMA_SESSION_VERSION).to_bytes(4, "little")
    Path(dst).write_bytes(bytes(b))


def scales(x):
    rms = np.sqrt((x ** 2).mean(0))
    return np.clip((rms.mean() / rms) ** 0.5, 0.5, 2.0)


with tempfile.TemporaryDirectory() as d:
    d = Path(d)
    tq("encode-kvdump", FIX / "p1_f16.ggsn", "-o", d / "l.tqkv", "--preset", "lossless", "-q")
    tq("decode-kvdump", d / "l.tqkv", "--format", "npz", "--head-dim", 8, "-o", d / "kv.npz", "-q")
    z = np.load(d / "kv.npz")
    rows = {r: np.concatenate([z[k].astype(np.float64).reshape(-1, 8) for k in z.files if k.startswith(r + "_")]) for r in "kv"}
    np.save(d / "pooled.npy", scales(np.concatenate([rows["k"], rows["v"]])).astype(np.float32))
    np.save(d / "kv.npy", np.array([scales(rows["k"]), scales(rows["v"])], np.float32))
    restorable(FIX / "p1_f16.ggsn", d / "ref.ggsn")
    ref = continuation_logits(M, d / "ref.ggsn", CONT)
    for label, extra in [("balanced", []), ("balanced + InnerQ pooled", ["--innerq", d / "pooled.npy"]),
                         ("balanced + InnerQ K/V", ["--innerq", d / "kv.npy"]), ("small", ["--preset", "small"]),
                         ("small + InnerQ K/V", ["--preset", "small", "--innerq", d / "kv.npy"])]:
        tq("encode-kvdump", FIX / "p1_f16.ggsn", "-o", d / "e.tqkv", "--model", M, "-q", *extra)
        tq("decode-kvdump", d / "e.tqkv", "-o", d / "e.ggsn", "-q")
        restorable(d / "e.ggsn", d / "r.ggsn")
        kl, top1 = compare(ref, continuation_logits(M, d / "r.ggsn", CONT))
        print(f"{label:26s} mean KL {kl:.5f}  top-1 {top1:.1%}")
