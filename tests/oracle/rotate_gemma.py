"""rotate-weights on a real, quantized model: Gemma 3 270M (Q4_K_M, gemma3:
post-norms, so R2 only; head size 256, one KV head for four query heads).
With an f32 KV cache, next-token logits of 320 tokens of each of our
prompts (make test the first; make test-full, TQ_TEST_FULL=1, both) are compared in llama.cpp:
- a rotation of random signs (--kind signs) gives logits bit for bit equal
  to the unrotated model with the same F32 V/O tensors: every V row and O
  column it touches is transformed consistently;
- the Hadamard R2 (--out-type f32) against that unrotated model: mean KL
  beside the rounding floor (the same model with flash attention off);
- the default output (rotated V/O in F16) against the original Q4_K_M.
R1 on gemma3 is refused with the reason and writes nothing."""
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FULL, LLAMA_THREADS, TQ, gemma, need, tq  # noqa: E402

np, llama_cpp = need("numpy", "llama_cpp")
from _llama_util import compare, log_softmax  # noqa: E402

MODEL = gemma()
N = 320
PROMPTS = sorted((Path(__file__).resolve().parent / "prompts").glob("*.txt"))[:None if FULL else 1]


def logits(model, toks, flash=True):
    llm = llama_cpp.Llama(model_path=str(model), n_ctx=N, n_batch=N, logits_all=True, verbose=False, flash_attn=flash,
                          type_k=0, type_v=0, **LLAMA_THREADS)  # f32 cache: no rounding of the rotated V
    llm.eval(toks)
    out = np.array(llm.scores[:len(toks)], dtype=np.float32)
    del llm
    return out


with tempfile.TemporaryDirectory() as d:
    d = Path(d)
    p = subprocess.run([TQ, "rotate-weights", "--r1", "on", MODEL, d / "r1.gguf"], capture_output=True, text=True)
    assert p.returncode == 1 and "post-norms" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (d / "r1.gguf").exists(), "a refusal left a file"
    base, signs, had, dflt = d / "base.gguf", d / "signs.gguf", d / "had.gguf", d / "dflt.gguf"
    # the same model with V and O dequantized to F32, unrotated: what the rotated ones are compared with
    tq("quantize-tq4", "-q", "--allow-requantize", "--policy", "attn", "--boundary-layers", "0",
       "--tensor-type", r"attn_(v|output)\.=f32", "--tensor-type", ".*=keep", MODEL, base)
    tq("rotate-weights", "-q", "--kind", "signs", "--out-type", "f32", MODEL, signs)
    tq("rotate-weights", "-q", "--out-type", "f32", MODEL, had)
    tq("rotate-weights", "-q", MODEL, dflt)
    vocab = llama_cpp.Llama(model_path=str(MODEL), n_ctx=64, verbose=False, vocab_only=True)
    worst = 0.0
    for f in PROMPTS:
        toks = vocab.tokenize(f.read_bytes(), add_bos=True)[:N]
        ref = logits(base, toks)
        same = np.array_equal(ref.view(np.uint32), logits(signs, toks).view(np.uint32))
        assert same, f"{f.name}: signs-rotated V/O changed the logits"
        floor = compare(ref, logits(base, toks, flash=False))
        rot = compare(ref, logits(had, toks))
        orig = logits(MODEL, toks)
        d16 = compare(orig, logits(dflt, toks))
        d32 = compare(orig, logits(had, toks))
        print(f"{f.name}: {len(toks)} tokens; signs: bit-identical logits; Hadamard R2 (F32 V/O) vs unrotated F32 V/O: "
              f"mean KL {rot[0]:.2e}, top-1 {rot[1]:.1%} (rounding floor {floor[0]:.2e}, {floor[1]:.1%}); "
              f"vs the original Q4_K_M: F32 out {d32[0]:.2e} / {d32[1]:.1%}, default F16 out {d16[0]:.2e} / {d16[1]:.1%}")
        assert rot[0] <= 2 * floor[0] + 1e-6 and rot[1] >= floor[1] - 0.01, (rot, floor)
        worst = max(worst, rot[0] / max(floor[0], 1e-12))
    print(f"ok: R2 on Gemma keeps the logits (KL at most {worst:.2f}x the rounding floor; signs bit-identical); R1 refused")
print("ok r2_on_gemma_keeps_the_logits")  # the behaviour, for tests/run.sh (reached only when every check passed)
