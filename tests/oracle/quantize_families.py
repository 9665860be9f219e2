"""tq quantize-tq4 on the families issue 37 adds (a tiny model of each, _tiny_models.py), with
llama-quantize's rules for their tensor kinds: the token mixers take the type (attention,
an MLA cache's projections, gated DeltaNet's and mamba's projections, lfm2's short
convolution's), convolution kernels, norms, routers and 1-D tensors are copied.
  - The default recipe (config-i) written --simulate (its converted tensors as F32 values)
    loads in llama.cpp and its next-token distributions over 48 positions stay near the
    F32 model's (mean KL reported, below 0.05);
  - every token mixer of a 2-D weight was converted (the plan says so);
  - --policy all with q8_0 blocks (real blocks, which stock llama.cpp reads) loads in
    llama.cpp (in a subprocess: this machine's pip llama.cpp dies of SIGILL in quantized
    matmuls, so it is loaded, not run).
Exit 77 = oracle missing."""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import TQ, need  # noqa: E402

np, gguf, llama_cpp = need("numpy", "gguf", "llama_cpp")
import _tiny_models  # noqa: E402
from _llama_util import compare, prompt_logits  # noqa: E402

ARCHS = ["mistral3", "smollm3", "qwen35", "qwen3next", "gpt-oss", "gemma4", "llama4", "deepseek2",
         "granitehybrid", "lfm2"]
MIXERS = ("attn_q.", "attn_k.", "attn_v.", "attn_output.", "attn_qkv.", "attn_q_a.", "attn_q_b.",
          "attn_kv_a_mqa.", "attn_k_b.", "attn_v_b.", "attn_gate.", "ssm_in.", "ssm_out.", "ssm_beta.",
          "ssm_alpha.", "ssm_ba.", "shortconv.in_proj.", "shortconv.out_proj.")
LOAD = ("import llama_cpp, sys; llama_cpp.Llama(model_path=sys.argv[1], n_ctx=64, verbose=False, "
        "n_threads=1)")


def check(d, name, toks):
    src = Path(_tiny_models.build(name, d))
    bad = []
    sim = d / f"{name}-sim.gguf"
    r = subprocess.run([TQ, "quantize-tq4", src, sim, "--simulate", "-q", "--json"], capture_output=True,
                       text=True)
    if r.returncode:
        return [f"quantize-tq4 --simulate: {r.stderr.strip()}"]
    plan = json.loads(r.stdout)
    for t in plan.get("tensors", []):
        role = t["name"].split(".", 2)[-1] if t["name"].startswith("blk.") else t["name"]
        two_d = sum(1 for x in t["shape"] if x > 1) >= 2
        if role.startswith(MIXERS) and two_d and t["to"] in ("f32", "f16", "bf16"):
            bad.append(f"{t['name']} kept as {t['to']}")
    kl, top1 = compare(prompt_logits(src, toks), prompt_logits(sim, toks))
    print(f"{name:14s} config-i, simulated: mean KL {kl:.4f} against F32, top-1 {top1:.1%}")
    if not kl < 0.05:
        bad.append(f"simulated KL {kl:.4f}")
    q8 = d / f"{name}-q8.gguf"
    r = subprocess.run([TQ, "quantize-tq4", src, q8, "--policy", "all", "--tensor-type", ".*=q8_0", "-q"],
                       capture_output=True, text=True)
    if r.returncode:
        return bad + [f"quantize-tq4 q8_0: {r.stderr.strip()}"]
    r = subprocess.run([sys.executable, "-c", LOAD, str(q8)], capture_output=True, text=True)
    if r.returncode:
        bad.append(f"llama.cpp did not load the q8_0 model: {r.stderr.strip()[-200:]}")
    return bad


def main():
    failed = 0
    toks = [1] + np.random.default_rng(3).integers(3, _tiny_models.VOCAB, 47).tolist()
    with tempfile.TemporaryDirectory() as td:
        for name in ARCHS:
            bad = check(Path(td), name, toks)
            print(f"FAIL: {name}: " + "; ".join(bad) if bad else f"ok {name}", flush=True)
            failed += bool(bad)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
