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
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import LLAMA_THREADS, FIX, STORIES, TQ, need, need_shared  # noqa: E402

np, llama_cpp = need("numpy", "llama_cpp")
need_shared(FIX / "p1_f16.ggsn", STORIES)
MODEL = STORIES
CONT = np.fromfile(FIX / "p1.cont.tok", dtype=np.int32).tolist()


def restorable(src, dst):
    b = bytearray(Path(src).read_bytes())
    b[4:8] = int(llama_cpp.LLAMA_SESSION_VERSION).to_bytes(4, "little")
    Path(dst).write_bytes(bytes(b))


from _llama_util import compare, continuation_logits as _cont  # noqa: E402


def continuation_logits(state_path, type_kv=None):
    return _cont(MODEL, state_path, CONT[:127], type_kv=type_kv)


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
    # --cache-type: the same snapshots restored into f32 and bf16 caches (a q8_0
    # cache needs heads of 32 or more; kv_generated_models.py covers it)
    for preset, ctype, type_id, max_kl in [("lossless", "f32", 0, 1e-4), ("balanced", "bf16", 30, 0.005)]:
        back = d / f"{preset}_{ctype}.ggsn"
        subprocess.run([TQ, "decode-kvdump", str(d / f"{preset}.tqkv"), "-o", str(back), "--cache-type", ctype, "-q"],
                       check=True)
        restorable(back, d / "r.ggsn")
        kl, top1 = compare(ref, continuation_logits(d / "r.ggsn", type_kv=type_id))
        print(f"{preset:9s} as {ctype:5s} cache: mean KL {kl:.5f}  top-1 {top1:.1%}")
        assert kl <= max_kl and top1 >= 0.98, (preset, ctype, kl, top1)
    # --tokens N: the snapshot's first N tokens restore as the state after
    # that prompt prefix; teacher-force the next 127 prompt tokens and compare
    # with llama.cpp evaluating prompt[:N+127] from scratch.  The fixture's
    # K/V came from the fork's build, so "same" means numerically close here.
    raw = (FIX / "p1_f16.ggsn").read_bytes()
    n_prompt = int.from_bytes(raw[8:12], "little")
    prompt = np.frombuffer(raw[12 : 12 + 4 * n_prompt], dtype=np.int32).tolist()
    N = 600
    llm = llama_cpp.Llama(model_path=str(MODEL), n_ctx=2048, n_batch=512, logits_all=True, verbose=False, flash_attn=True, **LLAMA_THREADS)
    llm.eval(prompt[: N + 127])
    fresh = np.array(llm.scores[N - 1 : N + 127], dtype=np.float64)
    del llm
    for preset, max_kl, min_top1 in [("lossless", 1e-3, 0.98), ("balanced", 0.005, 0.95)]:
        back = d / f"{preset}_p{N}.ggsn"
        subprocess.run([TQ, "decode-kvdump", str(d / f"{preset}.tqkv"), "-o", str(back), "--tokens", str(N), "-q"],
                       check=True)
        restorable(back, d / "r.ggsn")
        kl, top1 = compare(fresh, _cont(MODEL, d / "r.ggsn", prompt[N : N + 127]))
        print(f"{preset:9s} first {N} tokens restored, vs evaluating the prompt afresh: mean KL {kl:.6f}  top-1 {top1:.1%}")
        assert kl <= max_kl and top1 >= min_top1, (preset, kl, top1)
print("ok stories_presets_restore_within_kl_bars")  # the behaviour, for tests/run.sh (reached only when every check passed)
