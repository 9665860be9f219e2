"""Long context guard on the shape most deployed models have (issue 29): SmolLM2-135M-Instruct
(llama: 30 layers, 3 KV heads of 64, dense GQA, no sliding window, so no cells a resumed
session never reads again), a session of 4096 tokens of our own texts (the prompts of the
oracle and bench tests, then the man pages), saved once under the model cache (keyed by the
text's hash: about 25 s of prefill on 2 cores), encoded with the default preset and the small
one, decoded, restored in llama.cpp, its last cell re-fed with the next 256 tokens in one
batch.  KL against the uncompressed restore, beside the floor (that restore fed one token a
call: another summation order).  A guard, not the acceptance run (that is
tests/bench/kv_long.py --model=smollm2 at 7168 tokens): every K tensor transform-coded (auto
finds it pays at this length), V's first cell kept (the attention sink's V is far shorter than
the others, and an error there reaches every step), the small preset's V transform-coded at
unit norm, and the presets within their bounds.
Exit 77 = oracle missing."""
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from _env import CACHE, ROOT, TQ, need, smollm2  # noqa: E402

np, llama_cpp = need("numpy", "llama_cpp")
from _llama_util import cached_session, compare  # noqa: E402
import kv_long  # noqa: E402
from long_sessions import MODELS  # noqa: E402

TOKENS, STEPS = 4096, 256
FILES = sorted((ROOT / "tests" / "oracle" / "prompts").glob("*.txt")) + \
    sorted((ROOT / "tests" / "bench" / "prompts").glob("*.txt")) + sorted((ROOT / "man").glob("*.1"))
# preset: (most bits per K/V value, most KL / floor)
LIMITS = {"balanced": (3.1, 2.0), "small": (2.3, 4.5)}


def session(llm):
    text = "\n\n".join(f.read_text() for f in FILES)
    key = hashlib.sha256(text.encode()).hexdigest()[:12]
    state = CACHE.parent / "long" / f"smollm2-135m-guard-{TOKENS}-{STEPS}-{key}.ggsn"
    return state, cached_session(llm, llm.tokenize(text.encode(), add_bos=True), TOKENS, STEPS, state)


def main():
    m = smollm2()
    llm = llama_cpp.Llama(model_path=str(m), n_ctx=TOKENS + 256, n_batch=512, logits_all=False, verbose=False,
                          flash_attn=True)
    state, cont = session(llm)
    ref = kv_long.run(llm, state, cont)
    floor = compare(ref, kv_long.run(llm, state, cont, one_by_one=True))[0]
    print(f"{TOKENS} tokens, {STEPS} steps: floor (one token a call) KL {floor:.5f}")
    values = MODELS["smollm2"]["kv_values"] * TOKENS
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        for preset, (max_bits, max_x) in LIMITS.items():
            snap = d / "x.tqkv"
            subprocess.run([TQ, "encode-kvdump", state, "-q", "-o", snap, "--model", m, "--preset", preset],
                           check=True)
            subprocess.run([TQ, "decode-kvdump", snap, "-q", "-o", d / "x.ggsn"], check=True)
            bits = 8 * snap.stat().st_size / values
            kl, top1 = compare(ref, kv_long.run(llm, d / "x.ggsn", cont))
            print(f"{preset:8s} {bits:.3f} bits  KL {kl:.5f} ({kl / floor:.2f}x floor)  top-1 {top1:.1%}")
            plan = subprocess.run([TQ, "encode-kvdump", state, "--dry-run", "--model", m, "--preset", preset],
                                  capture_output=True, text=True, check=True).stdout
            rows = [ln for ln in plan.splitlines() if ln.startswith("  state")]
            k_rows = [ln for ln in rows if " K " in ln]
            v_rows = [ln for ln in rows if " V " in ln]
            assert len(k_rows) == 30 and all("klt(" in ln for ln in k_rows), "K not transform-coded:\n" + plan
            assert len(v_rows) == 30 and all("+sink" in ln for ln in v_rows), "V's first cell not kept:\n" + plan
            if preset == "small":  # V transform-coded at unit norm, but where its blocks cost less
                gains = sum("klt(" in ln and "+gains" in ln for ln in v_rows)
                assert gains >= 20, f"small: {gains} of 30 V tensors transform-coded with gains:\n" + plan
            assert bits <= max_bits, f"{preset}: {bits:.3f} bits, more than {max_bits}"
            assert kl <= max_x * floor, f"{preset}: KL {kl:.5f}, {kl / floor:.2f}x the floor {floor:.5f}"


if __name__ == "__main__":
    main()
print("ok smollm2_long_session_restores_within_the_guard")  # the behaviour, for tests/run.sh (reached only when every check passed)
