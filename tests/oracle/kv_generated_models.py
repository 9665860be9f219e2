"""Snapshots of states from generated llama models at realistic head sizes
(64 and 128, GQA 4), in llama.cpp (llama-cpp-python): save a state after a
600-token prompt, encode, decode, restore, continue 64 steps with teacher
forcing.  Lossless gives identical logits; at head size 128 the default
preset stays at or under 4.6 bits per value and is at least as close to the
uncompressed restore (mean KL, top-1) as the fork's turbo4 blocks on the
same state.  Exit 77 = oracle missing."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import numpy as np
    import gguf
    import llama_cpp  # noqa: F401
except ImportError as e:
    print(f"{e.name} not installed (pip install llama-cpp-python gguf numpy)")
    sys.exit(77)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _llama_util import compare, continuation_logits, save_state  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("TQ_SHARED") or ROOT.parent / "shared")
STORIES = SHARED / "models" / "stories260K.gguf"
if not STORIES.exists():
    print("../shared/models/stories260K.gguf not found (its tokenizer is reused)")
    sys.exit(77)
TQ = str(ROOT / "tq")


def make_model(path, head_dim, n_head=8, n_head_kv=2, n_layer=2, seed=0):
    """A llama model with random weights and stories260K's tokenizer."""
    src = gguf.GGUFReader(str(STORIES))
    rng = np.random.default_rng(seed)
    n_embd, n_ff = n_head * head_dim, 512
    w = gguf.GGUFWriter(str(path), "llama")
    for k in ["tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
              "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"]:
        f = src.fields[k]
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            items = [f.parts[i] for i in f.data]
            if f.types[-1] == gguf.GGUFValueType.STRING:
                w.add_array(k, [bytes(x).decode() for x in items])
            else:
                w.add_array(k, [x.tolist()[0] for x in items])
        elif f.types[0] == gguf.GGUFValueType.STRING:
            w.add_string(k, bytes(f.parts[f.data[0]]).decode())
        else:
            w.add_uint32(k, int(f.parts[f.data[0]][0]))
    vocab = len(src.fields["tokenizer.ggml.tokens"].data)
    w.add_context_length(2048)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(0)

    def mat(o, i, scale=1.0):
        return (rng.standard_normal((o, i)) * scale / np.sqrt(i)).astype(np.float32)

    w.add_tensor("token_embd.weight", (rng.standard_normal((vocab, n_embd))).astype(np.float32))
    w.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
    w.add_tensor("output.weight", mat(vocab, n_embd))
    for l in range(n_layer):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", np.ones(n_embd, np.float32))
        w.add_tensor(p + "attn_q.weight", mat(n_embd, n_embd, 2.0))
        w.add_tensor(p + "attn_k.weight", mat(n_head_kv * head_dim, n_embd, 2.0))
        w.add_tensor(p + "attn_v.weight", mat(n_head_kv * head_dim, n_embd))
        w.add_tensor(p + "attn_output.weight", mat(n_embd, n_embd))
        w.add_tensor(p + "ffn_norm.weight", np.ones(n_embd, np.float32))
        w.add_tensor(p + "ffn_gate.weight", mat(n_ff, n_embd))
        w.add_tensor(p + "ffn_up.weight", mat(n_ff, n_embd))
        w.add_tensor(p + "ffn_down.weight", mat(n_embd, n_ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return vocab, n_layer * 2 * n_head_kv * head_dim


def run(d, head_dim):
    model = d / f"gen{head_dim}.gguf"
    vocab, values_per_cell = make_model(model, head_dim)
    rng = np.random.default_rng(head_dim)
    prompt = [1] + rng.integers(3, vocab, 599).tolist()
    cont = rng.integers(3, vocab, 63).tolist()
    state = d / f"s{head_dim}.ggsn"
    save_state(model, prompt, state)
    ref = continuation_logits(model, state, cont)
    values = len(prompt) * values_per_cell
    res = {}
    cases = [("lossless", ["--preset", "lossless"]), ("q8", ["--preset", "q8"]), ("balanced", []),
             ("small", ["--preset", "small"])]
    if head_dim == 128:
        cases.append(("turbo4", ["--turbo", "--k-bits", "4", "--v-bits", "4"]))
    for name, args in cases:
        snap, back = d / f"{name}{head_dim}.tqkv", d / f"{name}{head_dim}.ggsn"
        subprocess.run([TQ, "encode-kvdump", str(state), "-o", str(snap), "--model", str(model), "-q"] + args, check=True)
        subprocess.run([TQ, "decode-kvdump", str(snap), "-o", str(back), "--model", str(model), "-q"], check=True)
        test = continuation_logits(model, back, cont)
        kl, top1 = compare(ref, test)
        bpv = snap.stat().st_size * 8 / values
        res[name] = (bpv, kl, top1)
        print(f"head_dim {head_dim:3d} {name:9s} {bpv:6.3f} bits/value  mean KL {kl:.6f}  top-1 {top1:.1%}")
        if name == "lossless":
            assert back.read_bytes() == state.read_bytes() and np.array_equal(ref, test)
    assert res["q8"][1] <= res["balanced"][1] <= res["small"][1], res
    # the balanced snapshot restored into an f32 cache (decode --cache-type f32)
    back = d / f"f32cache{head_dim}.ggsn"
    subprocess.run([TQ, "decode-kvdump", str(d / f"balanced{head_dim}.tqkv"), "-o", str(back), "--cache-type", "f32",
                    "-q"], check=True)
    kl, top1 = compare(ref, continuation_logits(model, back, cont, type_kv=0))
    print(f"head_dim {head_dim:3d} balanced as f32 cache: mean KL {kl:.6f}  top-1 {top1:.1%}")
    assert kl <= 1.5 * res["balanced"][1] + 1e-4, (kl, res["balanced"])
    if head_dim == 128:
        b, t = res["balanced"], res["turbo4"]
        assert b[0] <= 4.6, f"balanced uses {b[0]:.3f} bits per value at head_dim 128"
        assert b[1] <= t[1] and b[2] >= t[2], f"balanced {b} is worse than turbo4 {t}"
    return res


with tempfile.TemporaryDirectory() as d:
    for hd in (64, 128):
        run(Path(d), hd)
