"""Random-weight models llama.cpp can run, for the oracle tests (not a test
itself): llama, qwen2 (q/k/v biases) and qwen3 (per-head Q/K norms) graphs
with stories260K's tokenizer (or, tokenizer_gguf None, a generated one of
the same shape) and any head size, GQA ratio, tied or untied
embeddings, non-trivial norm gains and outlier channels."""
import gguf
import numpy as np

TOKENIZER_KEYS = ["tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                  "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"]


def spm_vocab(n=512):
    """A llama (SentencePiece) vocabulary of n tokens shaped like
    stories260K's: <unk>, <s>, </s>, the 256 byte tokens (so any text
    tokenizes), then word pieces; for models made without ../shared."""
    pieces = []
    for a in "etaoinshrdlucmfwypvbgkqjxz":
        pieces += ["\u2581" + a, a]
    for a in "etaoinshrdlu":
        for b in "etaoinshrdlu":
            pieces += ["\u2581" + a + b, a + b]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    tokens += pieces[: n - len(tokens)]
    types = [2, 3, 3] + [6] * 256 + [1] * (n - 259)
    scores = [0.0] * 259 + [-float(i) for i in range(n - 259)]
    return tokens, scores, types


def add_spm_tokenizer(w, n=512):
    tokens, scores, types = spm_vocab(n)
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.scores", scores)
    w.add_array("tokenizer.ggml.token_type", types)
    w.add_uint32("tokenizer.ggml.bos_token_id", 1)
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    w.add_uint32("tokenizer.ggml.unknown_token_id", 0)
    return len(tokens)


def make_model(path, tokenizer_gguf, head_dim, n_head=8, n_head_kv=2, n_layer=2, seed=0, arch="llama", n_embd=None,
               n_ff=512, tied=False, gains=False, outliers=0, dtype=np.float32, k_outliers=0, stories_order=False,
               k_bias=0.0):
    """Returns (vocab size, K+V values per cell).  n_ff: one width, or one
    per layer (llama.cpp reads an array).  gains: RMSNorm weights
    around 1 instead of ones; outliers: that many residual channels scaled
    up in the embeddings and norm gains (as trained models have);
    k_outliers: that many RoPE pairs of every K head made 8x larger, with
    the matching Q rows 8x smaller (the same attention, K with the outlier
    channels trained models' caches have).  stories_order: the tensors in
    stories260K's order (q, k, v, output, attn_norm, gate, down, up,
    ffn_norm per layer), as the tests that read its logs expect.  k_bias: a
    K bias of that spread (a constant pre-RoPE offset; qwen2's own biases
    take it for K)."""
    rng = np.random.default_rng(seed)
    n_embd = n_embd or n_head * head_dim
    w = gguf.GGUFWriter(str(path), arch)
    src = gguf.GGUFReader(str(tokenizer_gguf)) if tokenizer_gguf else None
    for k in TOKENIZER_KEYS if src else []:
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
    vocab = len(src.fields["tokenizer.ggml.tokens"].data) if src else add_spm_tokenizer(w)
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

    tensors = []

    def put(name, arr):
        tensors.append((name, arr))

    embd = rng.standard_normal((vocab, n_embd))
    embd[:, hot] *= 8
    put("token_embd.weight", embd.astype(dtype))
    put("output_norm.weight", gain())
    if not tied:
        put("output.weight", mat(vocab, n_embd))
    q_out, kv_out = n_head * head_dim, n_head_kv * head_dim
    for l in range(n_layer):
        p = f"blk.{l}."
        put(p + "attn_norm.weight", gain())
        wq, wk = mat(q_out, n_embd, 2.0), mat(kv_out, n_embd, 2.0)
        if k_outliers:  # pairs (2i, 2i+1): llama's adjacent RoPE; half-split archs pair i with i + d/2
            pairs = rng.choice(head_dim // 2, k_outliers, replace=False)
            ch = np.concatenate([2 * pairs, 2 * pairs + 1]) if arch == "llama" else np.concatenate([pairs, pairs + head_dim // 2])
            for h in range(n_head_kv):
                wk[h * head_dim + ch] *= 8
            for h in range(n_head):
                wq[h * head_dim + ch] /= 8
        put(p + "attn_q.weight", wq)
        put(p + "attn_k.weight", wk)
        put(p + "attn_v.weight", mat(kv_out, n_embd))
        if arch == "qwen2":
            for n, o in (("q", q_out), ("k", kv_out), ("v", kv_out)):
                put(p + f"attn_{n}.bias", ((k_bias if n == "k" and k_bias else 0.5) *
                                            rng.standard_normal(o)).astype(np.float32))
        elif k_bias:  # a K bias of that spread (llama.cpp loads attn_k.bias where present)
            put(p + "attn_k.bias", (k_bias * rng.standard_normal(kv_out)).astype(np.float32))
        if arch == "qwen3":
            put(p + "attn_q_norm.weight", (1 + 0.2 * rng.standard_normal(head_dim)).astype(np.float32))
            put(p + "attn_k_norm.weight", (1 + 0.2 * rng.standard_normal(head_dim)).astype(np.float32))
        put(p + "attn_output.weight", mat(n_embd, q_out))
        put(p + "ffn_norm.weight", gain())
        ff = n_ff[l] if isinstance(n_ff, (list, tuple)) else n_ff
        put(p + "ffn_gate.weight", mat(ff, n_embd))
        put(p + "ffn_up.weight", mat(ff, n_embd))
        put(p + "ffn_down.weight", mat(n_embd, ff))
    per_layer = ["attn_q", "attn_k", "attn_v", "attn_output", "attn_norm", "ffn_gate", "ffn_down", "ffn_up",
                 "ffn_norm"]

    def stories_key(item):
        name = item[0]
        if not name.startswith("blk."):
            return (-1, 0)
        _, l, role = name.split(".", 2)
        role = role.rsplit(".", 1)[0]
        return (int(l), per_layer.index(role) if role in per_layer else len(per_layer))

    for name, arr in sorted(tensors, key=stories_key) if stories_order else tensors:
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return vocab, n_layer * 2 * n_head_kv * head_dim
