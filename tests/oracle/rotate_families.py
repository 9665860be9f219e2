"""tq rotate-weights on the families issue 37 adds where the rotation is exact: mistral3 and
smollm3 (llama-shaped: RMSNorm before attention and FFN, no sandwich norms, dense FFN; NoPE
layers change nothing, R1 and R2 act outside RoPE).  A tiny model of each (_tiny_models.py,
embeddings of 256, heads of 128 and 64) gives the same logits rotated as unrotated over 64
positions in llama.cpp (an f32 KV cache, as rotate_llama.py): mean KL below 1e-5 and the same
top-1 everywhere.  Exit 77 = oracle missing."""
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import TQ, need  # noqa: E402

np, gguf, llama_cpp = need("numpy", "gguf", "llama_cpp")
import _tiny_models  # noqa: E402
from _llama_util import compare, prompt_logits  # noqa: E402

ARCHS = ["mistral3", "smollm3"]


def main():
    failed = 0
    toks = [1] + np.random.default_rng(1).integers(3, _tiny_models.VOCAB, 63).tolist()
    with tempfile.TemporaryDirectory() as td:
        for name in ARCHS:
            src = Path(_tiny_models.build(name, td, wide=True))
            rot = src.with_suffix(".rot.gguf")
            r = subprocess.run([TQ, "rotate-weights", src, rot, "-q"], capture_output=True, text=True)
            if r.returncode:
                print(f"FAIL: {name}: rotate-weights: {r.stderr.strip()}")
                failed += 1
                continue
            kl, top1 = compare(prompt_logits(src, toks, f32_cache=True), prompt_logits(rot, toks, f32_cache=True))
            print(f"{name}: rotated against unrotated, mean KL {kl:.2e}, top-1 {top1:.1%}")
            ok = kl < 1e-5 and top1 == 1.0
            print(f"ok {name}" if ok else f"FAIL: {name}: KL {kl:.2e}, top-1 {top1:.1%}")
            failed += not ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
