"""Real round trip in llama.cpp (llama-cpp-python): restore the fixture
session p1_f16.ggsn (stories260K, 1239 prompt tokens) and, for every preset,
its encode -> decode copy; continue 128 steps with teacher forcing
(p1.cont.tok) and compare next-token distributions with the uncompressed
restore: mean KL(reference || test) and top-1 agreement.  Lossless must give
identical logits; the default preset must reach KL <= 0.005, top-1 >= 98% at
<= 7 bits per K/V value.

The fixtures are session v9 files (the TurboQuant+ fork's llama.cpp); the
llama.cpp inside llama-cpp-python writes and reads v10 with the same body for
this model, so the test relabels the version field before restoring (the
files tq decodes keep v9, as the fork expects).  Exit 77 = oracle missing."""
import ctypes
import os
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import numpy as np
    import llama_cpp
except ImportError as e:
    print(f"{e.name} not installed (pip install llama-cpp-python numpy)")
    sys.exit(77)

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("TQ_SHARED") or ROOT.parent / "shared")
FIX = SHARED / "fixtures" / "llama-state"
MODEL = SHARED / "models" / "stories260K.gguf"
if not (FIX / "p1_f16.ggsn").exists() or not MODEL.exists():
    print("../shared fixtures or model not found")
    sys.exit(77)
TQ = str(ROOT / "tq")
CONT = np.fromfile(FIX / "p1.cont.tok", dtype=np.int32).tolist()


def restorable(src, dst):
    b = bytearray(Path(src).read_bytes())
    b[4:8] = int(llama_cpp.LLAMA_SESSION_VERSION).to_bytes(4, "little")
    Path(dst).write_bytes(bytes(b))


def continuation_logits(state_path):
    llm = llama_cpp.Llama(model_path=str(MODEL), n_ctx=2048, n_batch=512, logits_all=True, verbose=False,
                          flash_attn=True)
    ctx = llm._ctx.ctx
    toks = (llama_cpp.llama_token * 4096)()
    n = ctypes.c_size_t(0)
    assert llama_cpp.llama_state_load_file(ctx, str(state_path).encode(), toks, 4096, ctypes.byref(n)), "restore failed"
    n = n.value
    mem = llama_cpp.llama_get_memory(ctx)
    llama_cpp.llama_memory_seq_rm(mem, 0, n - 1, -1)  # drop the last cell, re-feed its token
    llm.n_tokens = n - 1
    llm.input_ids[: n - 1] = list(toks[: n - 1])
    llm.eval([toks[n - 1]] + CONT[:127])
    out = np.array(llm.scores[n - 1 : n - 1 + 128], dtype=np.float64)
    del llm
    return out


def log_softmax(x):
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def compare(ref, test):
    lp, lq = log_softmax(ref), log_softmax(test)
    kl = (np.exp(lp) * (lp - lq)).sum(axis=1)
    return float(kl.mean()), float((ref.argmax(1) == test.argmax(1)).mean())


with tempfile.TemporaryDirectory() as d:
    d = Path(d)
    restorable(FIX / "p1_f16.ggsn", d / "ref.ggsn")
    ref = continuation_logits(d / "ref.ggsn")
    fork_ref = np.fromfile(FIX / "p1_f16.cont.logits.f32", dtype=np.float32).reshape(128, -1)
    kl_fork, top1_fork = compare(fork_ref.astype(np.float64), ref)
    print(f"pip llama.cpp vs the fork's reference logits: KL {kl_fork:.2e}, top-1 {top1_fork:.1%}")
    assert top1_fork >= 0.95, "the restore itself does not reproduce the fixture's continuation"
    values = 1239 * 5 * 2 * 32
    rows = []
    for preset in ["lossless", "q8", "balanced", "small"]:
        snap, back = d / f"{preset}.tqkv", d / f"{preset}.ggsn"
        subprocess.run([TQ, "encode-kvdump", str(FIX / "p1_f16.ggsn"), "-o", str(snap), "--preset", preset,
                        "--model", str(MODEL), "-q"], check=True)
        subprocess.run([TQ, "decode-kvdump", str(snap), "-o", str(back), "--model", str(MODEL), "-q"], check=True)
        if preset == "lossless":
            assert back.read_bytes() == (FIX / "p1_f16.ggsn").read_bytes()
        restorable(back, d / "r.ggsn")
        test = continuation_logits(d / "r.ggsn")
        kl, top1 = compare(ref, test)
        bpv = snap.stat().st_size * 8 / values
        rows.append((preset, bpv, kl, top1))
        print(f"{preset:9s} {bpv:6.3f} bits/value  mean KL {kl:.5f}  top-1 {top1:.1%}")
        if preset == "lossless":
            assert np.array_equal(ref, test), "lossless restore changed the logits"
        if preset == "balanced":
            assert bpv <= 7 and kl <= 0.005 and top1 >= 0.98, (bpv, kl, top1)
    # quality falls as bits fall
    assert rows[1][2] <= rows[2][2] <= rows[3][2], rows
