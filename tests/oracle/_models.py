"""Random-weight models llama.cpp can run, for the oracle tests (not a test
itself): llama, qwen2 (q/k/v biases) and qwen3 (per-head Q/K norms) graphs
with stories260K's tokenizer and any head size, GQA ratio, tied or untied
embeddings, non-trivial norm gains and outlier channels."""
import gguf
import numpy as np

TOKENIZER_KEYS = ["tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                  "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"]


def make_model(path, tokenizer_gguf, head_dim, n_head=8, n_head_kv=2, n_layer=2, seed=0, arch="llama", n_embd=None,
               n_ff=512, tied=False, gains=False, outliers=0, dtype=np.float32, k_outliers=0):
    """Returns (vocab size, K+V values per cell).  n_ff: one width, or one
    per layer (llama.cpp reads an array).  gains: RMSNorm weights
    around 1 instead of ones; outliers: that many residual channels scaled
    up in the embeddings and norm gains (as trained models have);
    k_outliers: that many RoPE pairs of every K head made 8x larger, with
    the matching Q rows 8x smaller (the same attention, K with the outlier
    channels trained models' caches have)."""
    src = gguf.GGUFReader(str(tokenizer_gguf))
    rng = np.random.default_rng(seed)
    n_embd = n_embd or n_head * head_dim
    w = gguf.GGUFWriter(str(path), arch)
    for k in TOKENIZER_KEYS:
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
    if n_embd != n_head * head_dim or arch == "qwen3":
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(0 if dtype == np.float32 else 1)
    hot = rng.choice(n_embd, outliers, replace=False) if outliers else []

    def mat(o, i, scale=1.0):
        return (rng.standard_normal((o, i)) * scale / np.sqrt(i)).astype(dtype)

    def gain():
        g = (1 + 0.3 * rng.standard_normal(n_embd)) if gains else np.ones(n_embd)
        g[hot] *= 6
        return g.astype(np.float32)

    embd = rng.standard_normal((vocab, n_embd))
    embd[:, hot] *= 8
    w.add_tensor("token_embd.weight", embd.astype(dtype))
    w.add_tensor("output_norm.weight", gain())
    if not tied:
        w.add_tensor("output.weight", mat(vocab, n_embd))
    q_out, kv_out = n_head * head_dim, n_head_kv * head_dim
    for l in range(n_layer):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", gain())
        wq, wk = mat(q_out, n_embd, 2.0), mat(kv_out, n_embd, 2.0)
        if k_outliers:  # pairs (2i, 2i+1): llama's adjacent RoPE; half-split archs pair i with i + d/2
            pairs = rng.choice(head_dim // 2, k_outliers, replace=False)
            ch = np.concatenate([2 * pairs, 2 * pairs + 1]) if arch == "llama" else np.concatenate([pairs, pairs + head_dim // 2])
            for h in range(n_head_kv):
                wk[h * head_dim + ch] *= 8
            for h in range(n_head):
                wq[h * head_dim + ch] /= 8
        w.add_tensor(p + "attn_q.weight", wq)
        w.add_tensor(p + "attn_k.weight", wk)
        w.add_tensor(p + "attn_v.weight", mat(kv_out, n_embd))
        if arch == "qwen2":
            for n, o in (("q", q_out), ("k", kv_out), ("v", kv_out)):
                w.add_tensor(p + f"attn_{n}.bias", (0.5 * rng.standard_normal(o)).astype(np.float32))
        if arch == "qwen3":
            w.add_tensor(p + "attn_q_norm.weight", (1 + 0.2 * rng.standard_normal(head_dim)).astype(np.float32))
            w.add_tensor(p + "attn_k_norm.weight", (1 + 0.2 * rng.standard_normal(head_dim)).astype(np.float32))
        w.add_tensor(p + "attn_output.weight", mat(n_embd, q_out))
        w.add_tensor(p + "ffn_norm.weight", gain())
        ff = n_ff[l] if isinstance(n_ff, (list, tuple)) else n_ff
        w.add_tensor(p + "ffn_gate.weight", mat(ff, n_embd))
        w.add_tensor(p + "ffn_up.weight", mat(ff, n_embd))
        w.add_tensor(p + "ffn_down.weight", mat(n_embd, ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return vocab, n_layer * 2 * n_head_kv * head_dim
