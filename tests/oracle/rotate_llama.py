"""tq rotate-weights in llama.cpp (llama-cpp-python):

1. Exactness: stories260K and generated models (head_dim 64 and 128, GQA
   ratios 1/4/8, qwen2 q/k/v biases, qwen3 per-head Q/K norms, tied and
   untied embeddings, n_embd 384 = 128 x 3, random RMSNorm gains) give the
   same next-token logits rotated as unrotated over 300 positions: max
   relative difference <= 1e-4 and identical argmax (an f32 KV cache: an
   f16 cache rounds K/V in a different basis).  F16 models stay within F16
   rounding.
2. Benefit, reported as measured: kurtosis and max/RMS of the weights before
   and after (tq inspect --stats), and next-token quality after TQ4_1S
   (--simulate) and Q4_0 (llama.cpp's quantizer) of the rotated versus the
   unrotated model, against the F32 model.  Quantized models are run as
   their dequantized F32 values: the pip llama.cpp dies with SIGILL on this
   machine's AMX paths for quantized matmuls, so activations stay F32 (real
   Q4_0 inference would also round them to Q8_0).
3. Composition: rotate-weights then quantize-tq4 keeps both provenance
   records, and tq inspect shows them.
4. Refusals: unsupported architecture, missing tensor, and with --r1 on a
   post-norm, LayerNorm or MoE graph: one line, exit 1, no output.  Without
   --r1 on those graphs get R2 alone, with the reason on stderr; a quantized
   input is dequantized and its rotated tensors written as F16.
Exit 77 = oracle missing."""
import ctypes
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FIX, STORIES, need, need_shared, tq  # noqa: E402

np, gguf, llama_cpp = need("numpy", "gguf", "llama_cpp")
need_shared(STORIES, FIX / "p1_f16.ggsn")
import _models  # noqa: E402
from _llama_util import compare, prompt_logits, prompt_tokens  # noqa: E402

PROMPT = prompt_tokens(FIX, 300)


def logits(model, f32_cache=True):
    return prompt_logits(model, PROMPT, f32_cache)


def exact(a, b):
    rel = float((np.abs(a - b).max(axis=1) / np.abs(a).max(axis=1)).max())
    return rel, bool((a.argmax(1) == b.argmax(1)).all())


with tempfile.TemporaryDirectory() as d:
    d = Path(d)
    # 1. exactness
    cases = [("stories260K", None),
             ("llama hd64 GQA1 untied", dict(head_dim=64, n_head=4, n_head_kv=4)),
             ("llama hd128 GQA4 tied", dict(head_dim=128, n_head=8, n_head_kv=2, tied=True)),
             ("llama hd64 GQA8", dict(head_dim=64, n_head=8, n_head_kv=1)),
             ("qwen2 biases hd64 GQA4 tied", dict(arch="qwen2", head_dim=64, n_head=8, n_head_kv=2, tied=True)),
             ("qwen3 qk-norm hd128 GQA4", dict(arch="qwen3", head_dim=128, n_head=4, n_head_kv=1, n_embd=256)),
             ("llama n_embd 384 (128x3)", dict(head_dim=64, n_head=6, n_head_kv=2)),
             ("llama hd64 f16", dict(head_dim=64, n_head=8, n_head_kv=2, dtype=np.float16))]
    for i, (label, kw) in enumerate(cases):
        if kw is None:
            model = STORIES
        else:
            model = d / f"m{i}.gguf"
            _models.make_model(model, STORIES, seed=i, gains=True, outliers=4, **kw)
        rot = d / f"r{i}.gguf"
        tq("rotate-weights", model, rot, "-q")
        a, b = logits(model), logits(rot)
        rel, same = exact(a, b)
        kl, _ = compare(a, b)
        print(f"{label:30s} max rel. logit difference {rel:.2e}, argmax identical: {same}, KL {kl:.1e}")
        if kw and kw.get("dtype") == np.float16:
            assert kl < 1e-3 and rel < 2e-2, (label, rel, kl)  # F16 rounding of the rotated weights
        else:
            assert rel <= 1e-4 and same, (label, rel)

    # each rotation alone is exact too
    ref = logits(STORIES)
    for flag in (["--r1", "off"], ["--r2", "off"]):
        tq("rotate-weights", *flag, STORIES, d / "one.gguf", "-q")
        rel, same = exact(ref, logits(d / "one.gguf"))
        print(f"stories260K {' '.join(flag):9s}          max rel. logit difference {rel:.2e}, argmax identical: {same}")
        assert rel <= 1e-4 and same, (flag, rel)

    # 2. benefit: weight statistics, and quality after quantization
    def stats(path):
        d_ = json.loads(tq("inspect", "--stats", "--json", path).stdout)
        ws = [t for t in d_["tensors"] if t["name"].endswith("weight") and len(t["shape"]) == 2 and "stats" in t]
        return (np.mean([t["stats"]["kurtosis"] for t in ws]),
                np.mean([max(abs(t["stats"]["min"]), abs(t["stats"]["max"])) / t["stats"]["rms"] for t in ws]))

    outl = d / "outliers.gguf"
    _models.make_model(outl, STORIES, head_dim=64, n_head=8, n_head_kv=2, seed=42, gains=True, outliers=8)
    for label, model in [("stories260K", STORIES), ("generated, outlier channels", outl)]:
        rot = d / "bench_rot.gguf"
        tq("rotate-weights", model, rot, "-q")
        (k0, m0), (k1, m1) = stats(model), stats(rot)
        print(f"{label}: mean kurtosis of 2-D weights {k0:.2f} -> {k1:.2f}, mean max/RMS {m0:.2f} -> {m1:.2f}")
        ref = logits(model)
        for qlabel in ["TQ4_1S (simulated)", "Q4_0"]:
            row = []
            for src in (model, rot):
                q = d / "bench_q.gguf"
                if qlabel.startswith("TQ4"):
                    tq("quantize-tq4", "--policy", "all", "--simulate", src, q, "-q")
                else:  # llama.cpp's Q4_0, run as its dequantized values (see below)
                    p = llama_cpp.llama_model_quantize_default_params()
                    p.ftype = 2
                    p.output_tensor_type = 2  # Q4_0 there too (its default, Q6_K, has no tq decoder)
                    q4 = d / "bench_q4.gguf"
                    assert llama_cpp.llama_model_quantize(str(src).encode(), str(q4).encode(), ctypes.byref(p)) == 0
                    tq("quantize-tq4", "--policy", "all", "--tensor-type", ".*=f32", "--allow-requantize", q4, q, "-q")
                row.append(compare(ref, logits(q)))
            (kl0, t0), (kl1, t1) = row
            verdict = ("rotation helps" if kl1 < kl0 and t1 >= t0 else "rotation does not help here"
                       if kl1 >= kl0 and t1 <= t0 else "mixed: " + ("KL lower, top-1 lower" if kl1 < kl0 else
                                                                 "KL higher, top-1 higher"))
            print(f"  {qlabel:19s} unrotated: KL {kl0:.4f} top-1 {t0:.1%}   rotated: KL {kl1:.4f} top-1 {t1:.1%}"
                  f"   ({verdict})")
        if "outlier" in label:
            assert k1 < k0 and m1 < m0, "rotation must spread the outlier channels"

    # 3. composition
    tq("rotate-weights", STORIES, d / "r.gguf", "-q")
    tq("quantize-tq4", d / "r.gguf", d / "rq.gguf", "-q")
    keys = {k["key"]: k.get("value") for k in json.loads(tq("inspect", "--json", d / "rq.gguf").stdout)["metadata"]}
    assert keys["tq.rotation.r1"] == 1 and keys["tq.rotation.r1.kind"] == "hadamard(64)" and keys["tq.quantize.type"] == "tq4_1s", keys
    human = tq("inspect", d / "rq.gguf").stdout
    assert "tq.rotation.r2.kind" in human and "tq.quantize.policy" in human
    print("rotate-weights + quantize-tq4: both provenance records present, shown by tq inspect")

    # 4. refusals
    def variant(path, arch="llama", extra=(), drop=(), q8=False):
        src = gguf.GGUFReader(str(STORIES))
        w = gguf.GGUFWriter(str(path), arch)
        for k in ["embedding_length", "block_count", "feed_forward_length", "attention.head_count",
                  "attention.head_count_kv", "attention.layer_norm_rms_epsilon", "context_length"]:
            f = src.fields["llama." + k]
            w.add_uint32(f"{arch}.{k}", int(f.parts[f.data[0]][0])) if "epsilon" not in k else \
                w.add_float32(f"{arch}.{k}", float(f.parts[f.data[0]][0]))
        for t in src.tensors:
            if t.name in drop:
                continue
            data = np.array(t.data).reshape(list(reversed([int(x) for x in t.shape])))
            if q8 and t.name.endswith("attn_q.weight"):
                w.add_tensor(t.name, gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0),
                             raw_dtype=gguf.GGMLQuantizationType.Q8_0)
            else:
                w.add_tensor(t.name, data)
        for name, arr in extra:
            w.add_tensor(name, arr)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    bad = [("phi3 arch", dict(arch="phi3"), "architecture 'phi3' is not supported"),
           ("post-norm", dict(extra=[("blk.0.attn_post_norm.weight", np.ones(64, np.float32))]), "post-norms"),
           ("LayerNorm", dict(extra=[("blk.0.attn_norm.bias", np.zeros(64, np.float32))]), "LayerNorm"),
           ("MoE router", dict(extra=[("blk.0.ffn_gate_inp.weight", np.zeros((4, 64), np.float32))]), "mixture of experts"),
           ("missing V", dict(drop=["blk.2.attn_v.weight"]), "missing tensor blk.2.attn_v.weight")]
    for label, kw, needle in bad:
        src, out = d / "bad.gguf", d / "bad_out.gguf"
        variant(src, **kw)
        p = tq("rotate-weights", "--r1", "on", src, out, ok=False)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 1 and len(lines) == 1 and needle in lines[0], (label, p.returncode, p.stderr)
        assert not out.exists() and not list(d.glob("bad_out.gguf.tmp*")), label
        if label in ("post-norm", "LayerNorm", "MoE router"):  # R2 stays exact inside the attention
            p = tq("rotate-weights", src, out)
            assert "R1 not folded" in p.stderr and needle in p.stderr, (label, p.stderr)
            out.unlink()
    variant(d / "q8.gguf", q8=True)
    tq("rotate-weights", "-q", d / "q8.gguf", d / "q8r.gguf")
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(d / "q8r.gguf")).tensors}
    assert types["blk.0.attn_q.weight"] == "F16" and types["blk.0.attn_k.weight"] == "F32", types
    print(f"refusals: {', '.join(b[0] for b in bad)}: one line each, nothing written; without --r1 on, "
          "the post-norm, LayerNorm and MoE graphs get R2 with the reason; a q8_0 input rotates to F16")
print("ok rotated_models_keep_the_logits_in_llama_cpp")  # the behaviour, for tests/run.sh (reached only when every check passed)
