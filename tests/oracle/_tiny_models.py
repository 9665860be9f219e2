"""Tiny random-weight models of the architectures llama.cpp (as llama-cpp-python 0.3.36 vendors
it) builds memories of every kind for: mistral3, smollm3 (NoPE every 4th layer), qwen35 and
qwen3next (hybrid: gated DeltaNet layers, every 4th layer attention), gpt-oss (sinks, sliding
window on alternate layers, set in code), gemma4 (per-layer head sizes), llama4 (chunked
attention, NoPE), deepseek2 (MLA), granitehybrid (Mamba2 layers where head_count_kv is 0) and
lfm2 (short convolutions); also the purely recurrent mamba, mamba2, rwkv6 and rwkv7, the MoE hybrids
qwen35moe and lfm2moe, and gemma4-shared (gemma4 whose last 2 of 6 layers reuse earlier layers' KV cache) -
for the oracle tests (not a test itself).

Hyperparameters and tensors are those llama.cpp's loaders ask for (src/llama-model.cpp,
src/models/*.cpp; shapes in GGUF order, ne0 first); weights ~ N(0, 1/fan_in), token embeddings
std 1, norm gains 1 +- 0.1; the 512-token SPM vocabulary of _models.py.  Pitfalls met: every
tensor written must be used (llama.cpp counts them); qwen35's attn_qkv/attn_gate and
granitehybrid's ssm_conv1d.bias are "not required" at load but needed to run; convolution
kernels stay f32; gpt-oss needs output.weight; lfm2's final norm is token_embd_norm; rwkv6/rwkv7 need
output.weight and layer-norm biases (token_embd_norm is their "ln0"); mamba needs d_inner == 2*n_embd;
lfm2moe needs expert_feed_forward_length and expert_gating_func; gemma4 KV sharing needs layer
n_layer-shared-2 sliding and n_layer-shared-1 full."""
import os

import numpy as np
import gguf

from _models import add_spm_tokenizer as _add_spm_tokenizer
from _models import spm_vocab as _spm_vocab

VOCAB = 512


def spm_vocab(n=VOCAB):
    return _spm_vocab(n)


class Tiny:
    """Collects hparams and tensors for one arch, then writes the GGUF."""

    def __init__(self, arch, seed=0, f16=False, k_bias=0.0, wide=False):
        self.arch, self.f16 = arch, f16
        self.k_bias = k_bias  # a K bias of this spread on every layer (a constant pre-RoPE offset)
        self.wide = wide      # mistral3, smollm3, llama4, lfm2: embeddings of 256 (heads of 64)
        self.e = 256 if wide else 64
        self.rng = np.random.default_rng(seed)
        self.kv = []       # (kind, key, value)
        self.tensors = []  # (name, np array)

    # ---- hparams ----------------------------------------------------------
    def u32(self, key, v):
        self.kv.append(("u32", key.replace("{a}", self.arch), v))

    def f32(self, key, v):
        self.kv.append(("f32", key.replace("{a}", self.arch), v))

    def bool(self, key, v):
        self.kv.append(("bool", key.replace("{a}", self.arch), v))

    def str(self, key, v):
        self.kv.append(("str", key.replace("{a}", self.arch), v))

    def arr(self, key, v):
        self.kv.append(("arr", key.replace("{a}", self.arch), v))

    def common(self, n_embd, n_layer, n_head, n_head_kv, n_ff, head_dim=None, ctx=2048, eps=1e-5, rope_base=10000.0):
        self.u32("{a}.context_length", ctx)
        self.u32("{a}.embedding_length", n_embd)
        self.u32("{a}.block_count", n_layer)
        if n_ff is not None:
            (self.arr if isinstance(n_ff, list) else self.u32)("{a}.feed_forward_length", n_ff)
        (self.arr if isinstance(n_head, list) else self.u32)("{a}.attention.head_count", n_head)
        if n_head_kv is not None:
            (self.arr if isinstance(n_head_kv, list) else self.u32)("{a}.attention.head_count_kv", n_head_kv)
        if head_dim is not None:
            self.u32("{a}.attention.key_length", head_dim)
            self.u32("{a}.attention.value_length", head_dim)
        self.f32("{a}.attention.layer_norm_rms_epsilon", eps)
        self.f32("{a}.rope.freq_base", rope_base)

    # ---- tensors ----------------------------------------------------------
    def _put(self, name, ne, arr):
        assert arr.shape == tuple(reversed(ne)), (name, ne, arr.shape)
        self.tensors.append((name, arr))

    def w(self, name, ne, scale=None):
        """Weight matrix / 3-D expert stack, ne in GGUF order (ne0 = input dim)."""
        scale = (1.0 / np.sqrt(ne[0])) if scale is None else scale
        a = (self.rng.standard_normal(tuple(reversed(ne))) * scale)
        # conv kernels must stay f32 (ggml_ssm_conv asserts src1 is f32), as the HF converter keeps them
        half = self.f16 and len(ne) >= 2 and "conv1d" not in name and "shortconv.conv" not in name
        self._put(name, ne, a.astype(np.float16 if half else np.float32))

    def norm(self, name, ne, jitter=0.1):
        ne = ne if isinstance(ne, (list, tuple)) else [ne]
        self._put(name, ne, (1.0 + jitter * self.rng.standard_normal(tuple(reversed(ne)))).astype(np.float32))

    def vec(self, name, ne, scale=0.1, offset=0.0):
        ne = ne if isinstance(ne, (list, tuple)) else [ne]
        self._put(name, ne, (offset + scale * self.rng.standard_normal(tuple(reversed(ne)))).astype(np.float32))

    def const(self, name, ne, values):
        ne = ne if isinstance(ne, (list, tuple)) else [ne]
        self._put(name, ne, np.asarray(values, dtype=np.float32).reshape(tuple(reversed(ne))))

    def embd(self, n_embd, output=True, output_norm="output_norm.weight", scale=1.0):
        self.w("token_embd.weight", [n_embd, VOCAB], scale=scale)
        self.norm(output_norm, n_embd)
        if output:
            self.w("output.weight", [n_embd, VOCAB])

    def qkv(self, i, n_embd, q, k, v, bias=False):
        p = f"blk.{i}."
        self.w(p + "attn_q.weight", [n_embd, q])
        self.w(p + "attn_k.weight", [n_embd, k])
        self.w(p + "attn_v.weight", [n_embd, v])
        if bias:
            self.vec(p + "attn_q.bias", q)
            self.vec(p + "attn_k.bias", k, scale=self.k_bias or 0.1)
            self.vec(p + "attn_v.bias", v)
        elif self.k_bias:
            self.vec(p + "attn_k.bias", k, scale=self.k_bias)

    def ffn(self, i, n_embd, n_ff, suffix=""):
        p = f"blk.{i}."
        self.w(p + f"ffn_gate{suffix}.weight", [n_embd, n_ff])
        self.w(p + f"ffn_up{suffix}.weight", [n_embd, n_ff])
        self.w(p + f"ffn_down{suffix}.weight", [n_ff, n_embd])

    def experts(self, i, n_embd, n_ff_exp, n_expert, router=True):
        p = f"blk.{i}."
        if router:
            self.w(p + "ffn_gate_inp.weight", [n_embd, n_expert])
        self.w(p + "ffn_gate_exps.weight", [n_embd, n_ff_exp, n_expert])
        self.w(p + "ffn_up_exps.weight", [n_embd, n_ff_exp, n_expert])
        self.w(p + "ffn_down_exps.weight", [n_ff_exp, n_embd, n_expert])

    # ---- output -----------------------------------------------------------
    def write(self, path):
        w = gguf.GGUFWriter(path, self.arch)
        w.add_name(f"tiny-{self.arch}")
        _add_spm_tokenizer(w, VOCAB)
        w.add_file_type(1 if self.f16 else 0)
        for kind, key, v in self.kv:
            if kind == "u32":
                w.add_uint32(key, int(v))
            elif kind == "f32":
                w.add_float32(key, float(v))
            elif kind == "bool":
                w.add_bool(key, bool(v))
            elif kind == "str":
                w.add_string(key, v)
            else:
                w.add_array(key, list(v))
        for name, a in self.tensors:
            w.add_tensor(name, a)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


# =========================================================================
# per-architecture recipes
# =========================================================================

def mistral3(m):
    # Ministral-3 style: llama block, explicit head_dim != n_embd/n_head, YaRN + llama4-style attn temperature
    E, L, H, KV, D, FF = m.e, 2, 4, 2, m.e // 2, 128
    m.common(E, L, H, KV, FF, head_dim=D, rope_base=1e6)
    m.u32("{a}.rope.dimension_count", D)
    if m.wide:  # plain RoPE (Mistral Small 3's), which tq rebuilds
        m.embd(E)
        for i in range(L):
            p = f"blk.{i}."
            m.norm(p + "attn_norm.weight", E)
            m.qkv(i, E, H * D, KV * D, KV * D)
            m.w(p + "attn_output.weight", [H * D, E])
            m.norm(p + "ffn_norm.weight", E)
            m.ffn(i, E, FF)
        return
    m.str("{a}.rope.scaling.type", "yarn")
    m.f32("{a}.rope.scaling.factor", 16.0)
    m.u32("{a}.rope.scaling.original_context_length", 128)
    m.f32("{a}.rope.scaling.yarn_beta_fast", 32.0)
    m.f32("{a}.rope.scaling.yarn_beta_slow", 1.0)
    m.f32("{a}.rope.scaling.yarn_log_multiplier", 1.0)
    m.f32("{a}.attention.temperature_scale", 0.1)
    m.embd(E)
    for i in range(L):
        p = f"blk.{i}."
        m.norm(p + "attn_norm.weight", E)
        m.qkv(i, E, H * D, KV * D, KV * D)
        m.w(p + "attn_output.weight", [H * D, E])
        m.norm(p + "ffn_norm.weight", E)
        m.ffn(i, E, FF)


def smollm3(m):
    # llama block; every 4th layer (il+1)%4==0 skips RoPE (hard-coded n_no_rope_layer_step = 4)
    E, L, H, KV, FF = m.e, 4, 4, 2, 128
    D = E // H
    m.common(E, L, H, KV, FF)
    m.u32("{a}.rope.dimension_count", D)
    m.embd(E, output=False)  # tied embeddings, like SmolLM3
    for i in range(L):
        p = f"blk.{i}."
        m.norm(p + "attn_norm.weight", E)
        m.qkv(i, E, H * D, KV * D, KV * D)
        m.w(p + "attn_output.weight", [H * D, E])
        m.norm(p + "ffn_norm.weight", E)
        m.ffn(i, E, FF)


def _gdn_hparams(m, L, S, NK, NV, K=4):
    m.u32("{a}.ssm.conv_kernel", K)
    m.u32("{a}.ssm.state_size", S)         # head_k_dim == head_v_dim
    m.u32("{a}.ssm.group_count", NK)       # linear key heads
    m.u32("{a}.ssm.time_step_rank", NV)    # linear value heads
    m.u32("{a}.ssm.inner_size", S * NV)    # value_dim
    m.u32("{a}.full_attention_interval", 4)


def _gdn_layer(m, i, E, S, NK, NV, K=4, qwen35=True):
    p = f"blk.{i}."
    key_dim, value_dim = S * NK, S * NV
    m.w(p + "attn_qkv.weight", [E, 2 * key_dim + value_dim])
    m.w(p + "attn_gate.weight", [E, value_dim])
    m.w(p + "ssm_conv1d.weight", [K, 2 * key_dim + value_dim], scale=0.5)
    m.vec(p + "ssm_dt.bias", NV, scale=0.5)
    m.const(p + "ssm_a", [NV], -np.exp(m.rng.uniform(-1, 1, NV)))   # -exp(A_log), no ".weight"
    if qwen35:
        m.w(p + "ssm_beta.weight", [E, NV])
        m.w(p + "ssm_alpha.weight", [E, NV])
    else:
        m.w(p + "ssm_ba.weight", [E, 2 * NV])
    m.norm(p + "ssm_norm.weight", S)
    m.w(p + "ssm_out.weight", [value_dim, E])


def _gated_attn_layer(m, i, E, H, KV, D):
    p = f"blk.{i}."
    m.qkv(i, E, 2 * H * D, KV * D, KV * D)   # Q projection carries query + gate
    m.w(p + "attn_output.weight", [H * D, E])
    m.norm(p + "attn_q_norm.weight", D)
    m.norm(p + "attn_k_norm.weight", D)


def qwen35(m):
    # Qwen3.5 dense (arch string "qwen35"; MoE variant is "qwen35moe"): 3 Gated-DeltaNet layers + 1
    # gated attention layer, a dense FFN: qwen3next's stack with M-RoPE sections
    qwen3next(m, qwen35=True, moe=False)


def qwen3next(m, qwen35=False, moe=True):
    E, L, H, KV, D, FF = m.e, 4, 4, 2, 64 if m.wide else 32, 128
    S, NK, NV = 16, 2, 4
    NE, NU, FFE, FFS = 4, 2, 32, 32
    # wide (kv_rope_facts.py): half the head turns, at a base of 1e4, so that a few hundred
    # positions turn every pair (at 1e7 most barely move)
    m.common(E, L, H, KV, FF, head_dim=D, rope_base=1e4 if m.wide else 1e7, eps=1e-6)
    m.u32("{a}.rope.dimension_count", D // 2 if m.wide else D // 4)  # partial RoPE (Qwen3-Next: a quarter)
    if qwen35:
        m.arr("{a}.rope.dimension_sections", [2, 1, 1, 0])  # required
    if moe:
        m.u32("{a}.expert_count", NE)
        m.u32("{a}.expert_used_count", NU)
        m.u32("{a}.expert_feed_forward_length", FFE)
        m.u32("{a}.expert_shared_feed_forward_length", FFS)
    _gdn_hparams(m, L, S, NK, NV)
    m.embd(E)
    for i in range(L):
        p = f"blk.{i}."
        m.norm(p + "attn_norm.weight", E)
        m.norm(p + "post_attention_norm.weight", E)
        if (i + 1) % 4 == 0:
            _gated_attn_layer(m, i, E, H, KV, D)
        else:
            _gdn_layer(m, i, E, S, NK, NV, qwen35=qwen35)
        if not moe:
            m.ffn(i, E, FF)
            continue
        m.experts(i, E, FFE, NE)
        m.w(p + "ffn_gate_inp_shexp.weight", [E])    # 1-D: one sigmoid gate per token
        m.ffn(i, E, FFS, suffix="_shexp")


def gpt_oss(m):
    E, L, H, KV, D = 64, 2, 4, 2, 64  # heads of 64, as gpt-oss's
    NE, NU, FFE = 4, 2, 32
    m.common(E, L, H, KV, FFE, head_dim=D, rope_base=150000.0)
    m.u32("{a}.rope.dimension_count", D)  # head size is n_rot here
    m.u32("{a}.expert_count", NE)
    m.u32("{a}.expert_used_count", NU)
    m.u32("{a}.expert_feed_forward_length", FFE)
    m.u32("{a}.attention.sliding_window", 16)  # layers alternate SWA / full (pattern 2)
    m.str("{a}.rope.scaling.type", "yarn")
    m.f32("{a}.rope.scaling.factor", 32.0)
    m.u32("{a}.rope.scaling.original_context_length", 64)
    m.embd(E)  # output.weight is REQUIRED for gpt-oss
    for i in range(L):
        p = f"blk.{i}."
        m.norm(p + "attn_norm.weight", E)
        m.norm(p + "post_attention_norm.weight", E)
        m.qkv(i, E, H * D, KV * D, KV * D, bias=True)
        m.w(p + "attn_output.weight", [H * D, E])
        m.vec(p + "attn_output.bias", E)
        m.vec(p + "attn_sinks.weight", H, scale=1.0)
        m.experts(i, E, FFE, NE)
        m.vec(p + "ffn_gate_inp.bias", NE)
        m.vec(p + "ffn_gate_exps.bias", [FFE, NE])
        m.vec(p + "ffn_up_exps.bias", [FFE, NE])
        m.vec(p + "ffn_down_exps.bias", [E, NE])


def gemma4(m, moe=False, ple=True, kv_swa=2, kv_full=1, d_swa=16, d_full=32):
    # E2B-like: per-layer embeddings (PLE); 26B-A4B-like: moe=True (dense MLP as shared expert + routed experts).
    # kv_*/d_*: the sliding and global layers' KV heads and head sizes (2 x 16 and 1 x 32: rows of equal width;
    # the released sizes' differ, as the -uneven recipes' do)
    E, L, FF = 64, 4, 128
    H, KV_SWA, KV_FULL = 4, kv_swa, kv_full
    D_SWA, D_FULL = d_swa, d_full
    PL = 8 if ple else 0
    NE, NU, FFE = 4, 2, 32
    swa = [True, True, True, False]  # 3 sliding + 1 full
    kv = [KV_SWA if s else KV_FULL for s in swa]
    m.common(E, L, H, kv, FF, head_dim=D_FULL, eps=1e-6, rope_base=1e6)
    m.u32("{a}.attention.key_length_swa", D_SWA)
    m.u32("{a}.attention.value_length_swa", D_SWA)
    m.u32("{a}.rope.dimension_count", D_FULL)
    m.u32("{a}.rope.dimension_count_swa", D_SWA)
    m.f32("{a}.rope.freq_base_swa", 10000.0)
    m.u32("{a}.attention.sliding_window", 16)
    m.arr("{a}.attention.sliding_window_pattern", swa)
    m.u32("{a}.attention.shared_kv_layers", 0)
    m.u32("{a}.embedding_length_per_layer_input", PL)
    m.f32("{a}.final_logit_softcapping", 30.0)
    if moe:
        m.u32("{a}.expert_count", NE)
        m.u32("{a}.expert_used_count", NU)
        m.u32("{a}.expert_feed_forward_length", FFE)
    m.embd(E, output=False)
    if PL:
        m.w("per_layer_token_embd.weight", [PL * L, VOCAB], scale=1.0)
        m.w("per_layer_model_proj.weight", [E, PL * L])
        m.norm("per_layer_proj_norm.weight", PL)
    n_rot_pairs = D_FULL // 8  # partial_rotary_factor 0.25 ("proportional" rope): rest get freq factor 1e30
    m.const("rope_freqs.weight", [D_FULL // 2], [1.0] * n_rot_pairs + [1e30] * (D_FULL // 2 - n_rot_pairs))
    for i in range(L):
        p = f"blk.{i}."
        D = D_SWA if swa[i] else D_FULL
        m.norm(p + "attn_norm.weight", E)
        m.qkv(i, E, H * D, kv[i] * D, kv[i] * D)
        m.w(p + "attn_output.weight", [H * D, E])
        m.norm(p + "attn_q_norm.weight", D)
        m.norm(p + "attn_k_norm.weight", D)
        m.norm(p + "post_attention_norm.weight", E)
        m.const(p + "layer_output_scale.weight", [1], [0.9])
        m.norm(p + "ffn_norm.weight", E)
        m.ffn(i, E, FF)
        m.norm(p + "post_ffw_norm.weight", E)
        if moe:
            m.w(p + "ffn_gate_inp.weight", [E, NE])
            m.norm(p + "ffn_gate_inp.scale", E)
            m.norm(p + "pre_ffw_norm_2.weight", E)
            m.norm(p + "post_ffw_norm_1.weight", E)
            m.norm(p + "post_ffw_norm_2.weight", E)
            m.experts(i, E, FFE, NE, router=False)
            m.norm(p + "ffn_down_exps.scale", NE)
        if PL:
            m.w(p + "inp_gate.weight", [E, PL])
            m.w(p + "proj.weight", [PL, E])
            m.norm(p + "post_norm.weight", E)


def llama4(m):
    # Scout-like: chunked attention (3 chunked : 1 full, no-RoPE on full layers), MoE every 2nd layer with shared expert
    E, L, H, KV, FF = m.e, 4, 4, 2, 128
    D = E // H
    NE, NU, FFE = 4, 1, 32
    m.common(E, L, H, KV, FF, rope_base=500000.0)
    m.u32("{a}.rope.dimension_count", D)
    m.u32("{a}.expert_count", NE)
    m.u32("{a}.expert_used_count", NU)
    m.u32("{a}.expert_feed_forward_length", FFE)
    m.u32("{a}.interleave_moe_layer_step", 2)
    m.embd(E)
    for i in range(L):
        p = f"blk.{i}."
        m.norm(p + "attn_norm.weight", E)
        m.qkv(i, E, H * D, KV * D, KV * D)
        m.w(p + "attn_output.weight", [H * D, E])
        m.norm(p + "ffn_norm.weight", E)
        if (i + 1) % 2 == 0:
            m.experts(i, E, FFE, NE)
            m.ffn(i, E, FFE, suffix="_shexp")  # shared expert width == expert width
        else:
            m.ffn(i, E, FF)


def deepseek2(m):
    # DeepSeek-V3-like MLA (q_lora, split attn_k_b/attn_v_b) + 1 dense lead layer + sigmoid-gated MoE with bias & shared expert
    E, L, H, FF = 64, 2, 4, 128
    QR, KVR, ROPE, NOPE, VD = 32, 64, 16, 32, 32
    NE, NU, FFE, NS = 4, 2, 32, 1
    # MLA-as-MQA cache: n_head_kv 1, key_length = kv_lora_rank + rope dim, value_length = kv_lora_rank
    m.common(E, L, H, 1, FF, eps=1e-6)
    m.u32("{a}.attention.key_length", KVR + ROPE)
    m.u32("{a}.attention.value_length", KVR)
    m.u32("{a}.attention.key_length_mla", NOPE + ROPE)
    m.u32("{a}.attention.value_length_mla", VD)
    m.u32("{a}.rope.dimension_count", ROPE)
    m.u32("{a}.attention.q_lora_rank", QR)    # required unless n_layer in {26,27} ("lite")
    m.u32("{a}.attention.kv_lora_rank", KVR)
    m.u32("{a}.leading_dense_block_count", 1)
    m.u32("{a}.expert_count", NE)
    m.u32("{a}.expert_used_count", NU)
    m.u32("{a}.expert_feed_forward_length", FFE)
    m.u32("{a}.expert_shared_count", NS)
    m.f32("{a}.expert_weights_scale", 2.5)
    m.bool("{a}.expert_weights_norm", True)
    m.u32("{a}.expert_gating_func", 2)  # 1 softmax, 2 sigmoid
    m.embd(E)
    for i in range(L):
        p = f"blk.{i}."
        m.norm(p + "attn_norm.weight", E)
        m.norm(p + "attn_q_a_norm.weight", QR)
        m.norm(p + "attn_kv_a_norm.weight", KVR)
        m.w(p + "attn_q_a.weight", [E, QR])
        m.w(p + "attn_q_b.weight", [QR, H * (NOPE + ROPE)])
        m.w(p + "attn_kv_a_mqa.weight", [E, KVR + ROPE])
        m.w(p + "attn_k_b.weight", [NOPE, KVR, H])
        m.w(p + "attn_v_b.weight", [KVR, VD, H])
        m.w(p + "attn_output.weight", [H * VD, E])
        m.norm(p + "ffn_norm.weight", E)
        if i < 1:
            m.ffn(i, E, FF)
        else:
            m.experts(i, E, FFE, NE)
            m.vec(p + "exp_probs_b.bias", NE)
            m.ffn(i, E, FFE * NS, suffix="_shexp")


def granitehybrid(m, moe=True):
    # Granite-4.0-H-tiny-like: Mamba2 layers (head_count_kv 0) + attention layers, MoE + shared expert
    # (moe=False: Granite-4.0-H-micro-like dense FFN)
    E, L, H, FF = m.e, 4, 4, 64
    kv = [0, 2, 0, 0]  # layer 1 is attention; 0 marks a recurrent (mamba2) layer
    D = E // H
    DI, DS, NH, NG, K = 2 * E, 16, 4, 1, 4   # d_inner must be 2*n_embd
    NE, NU, FFS = 4, 2, 64
    m.common(E, L, H, kv, FF)
    m.u32("{a}.rope.dimension_count", D)
    m.u32("{a}.ssm.conv_kernel", K)
    m.u32("{a}.ssm.inner_size", DI)
    m.u32("{a}.ssm.state_size", DS)
    m.u32("{a}.ssm.time_step_rank", NH)
    m.u32("{a}.ssm.group_count", NG)
    m.f32("{a}.logit_scale", 4.0)
    m.f32("{a}.residual_scale", 0.22)
    m.f32("{a}.embedding_scale", 12.0)
    m.f32("{a}.attention.scale", 0.0625)
    if moe:
        m.u32("{a}.expert_count", NE)
        m.u32("{a}.expert_used_count", NU)
        m.u32("{a}.expert_shared_feed_forward_length", FFS)
    m.embd(E, output=False, scale=1.0 / 12)  # embedding_scale 12 would otherwise swamp the residual stream
    for i in range(L):
        p = f"blk.{i}."
        m.norm(p + "attn_norm.weight", E)
        if kv[i] == 0:
            m.w(p + "ssm_in.weight", [E, 2 * DI + 2 * NG * DS + NH])
            m.w(p + "ssm_conv1d.weight", [K, DI + 2 * NG * DS], scale=0.5)
            m.vec(p + "ssm_conv1d.bias", DI + 2 * NG * DS)
            m.vec(p + "ssm_dt.bias", NH, scale=0.5)
            m.const(p + "ssm_a", [1, NH], -np.exp(m.rng.uniform(-1, 1, NH)))  # no ".weight"
            m.const(p + "ssm_d", [1, NH], np.ones(NH))
            m.norm(p + "ssm_norm.weight", [DI // NG, NG])
            m.w(p + "ssm_out.weight", [DI, E])
        else:
            m.qkv(i, E, H * D, kv[i] * D, kv[i] * D)
            m.w(p + "attn_output.weight", [H * D, E])
        m.norm(p + "ffn_norm.weight", E)
        if moe:
            m.experts(i, E, FF, NE)     # expert width is feed_forward_length
            m.ffn(i, E, FFS, suffix="_shexp")
        else:
            m.ffn(i, E, FF)


def lfm2(m):
    # LFM2: short-conv layers (head_count_kv 0) + GQA attention layers with QK-norm; final norm is "token_embd_norm"
    E, L, H, FF, LC = m.e, 4, 4, 128, 3
    kv = [0, 0, 2, 0]
    D = E // H
    m.common(E, L, H, kv, FF)
    m.u32("{a}.rope.dimension_count", D)
    m.u32("{a}.shortconv.l_cache", LC)
    m.embd(E, output=False, output_norm="token_embd_norm.weight")
    for i in range(L):
        p = f"blk.{i}."
        m.norm(p + "attn_norm.weight", E)
        m.norm(p + "ffn_norm.weight", E)
        m.ffn(i, E, FF)
        if kv[i]:
            m.norm(p + "attn_q_norm.weight", D)
            m.norm(p + "attn_k_norm.weight", D)
            m.qkv(i, E, E, kv[i] * D, kv[i] * D)
            m.w(p + "attn_output.weight", [E, E])
        else:
            m.w(p + "shortconv.conv.weight", [LC, E], scale=0.5)
            m.w(p + "shortconv.in_proj.weight", [E, 3 * E])
            m.w(p + "shortconv.out_proj.weight", [E, E])


# ---- recurrent-only and further hybrid archs -----------------------------

def _no_attn(m, E, L, n_ff=None, ctx=2048):
    # recurrent archs: no attention; head_count 0 ("required by llama.cpp, unused", as the converters write it)
    m.u32("{a}.context_length", ctx)
    m.u32("{a}.embedding_length", E)
    m.u32("{a}.block_count", L)
    m.u32("{a}.attention.head_count", 0)
    if n_ff is not None:
        m.u32("{a}.feed_forward_length", n_ff)


def mamba(m):
    # Mamba-1: d_inner must be 2*n_embd; ssm_a is [d_state, d_inner] (S4D-real init: -(1..d_state))
    E, L, DS, DTR, K = 64, 2, 16, 4, 4
    DI = 2 * E
    _no_attn(m, E, L)
    m.u32("{a}.ssm.conv_kernel", K)
    m.u32("{a}.ssm.inner_size", DI)
    m.u32("{a}.ssm.state_size", DS)
    m.u32("{a}.ssm.time_step_rank", DTR)
    m.f32("{a}.attention.layer_norm_rms_epsilon", 1e-5)
    m.embd(E, output=False)  # tied, like the state-spaces checkpoints
    for i in range(L):
        p = f"blk.{i}."
        m.norm(p + "attn_norm.weight", E)
        m.w(p + "ssm_in.weight", [E, 2 * DI])
        m.w(p + "ssm_conv1d.weight", [K, DI], scale=0.5)
        m.vec(p + "ssm_conv1d.bias", DI)
        m.w(p + "ssm_x.weight", [DI, DTR + 2 * DS])
        m.w(p + "ssm_dt.weight", [DTR, DI])
        m.vec(p + "ssm_dt.bias", DI, scale=0.5, offset=-2.0)    # softplus(dt) ~ 0.1
        a = -np.tile(np.arange(1, DS + 1, dtype=np.float64), (DI, 1)) * np.exp(0.1 * m.rng.standard_normal((DI, DS)))
        m.const(p + "ssm_a", [DS, DI], a)                        # -exp(A_log), no ".weight"
        m.const(p + "ssm_d", [DI], np.ones(DI))
        m.w(p + "ssm_out.weight", [DI, E])


def mamba2(m):
    # Mamba-2: NH heads of DI/NH, NG groups; ssm_in packs z, xBC, dt
    E, L, DS, NH, NG, K = 64, 2, 16, 4, 1, 4
    DI = 2 * E
    _no_attn(m, E, L)
    m.u32("{a}.ssm.conv_kernel", K)
    m.u32("{a}.ssm.inner_size", DI)
    m.u32("{a}.ssm.state_size", DS)
    m.u32("{a}.ssm.time_step_rank", NH)
    m.u32("{a}.ssm.group_count", NG)
    m.f32("{a}.attention.layer_norm_rms_epsilon", 1e-5)
    m.embd(E, output=False)
    for i in range(L):
        p = f"blk.{i}."
        m.norm(p + "attn_norm.weight", E)
        m.w(p + "ssm_in.weight", [E, 2 * DI + 2 * NG * DS + NH])
        m.w(p + "ssm_conv1d.weight", [K, DI + 2 * NG * DS], scale=0.5)
        m.vec(p + "ssm_conv1d.bias", DI + 2 * NG * DS)
        m.vec(p + "ssm_dt.bias", NH, scale=0.5)
        m.const(p + "ssm_a", [1, NH], -np.exp(m.rng.uniform(-1, 1, NH)))  # no ".weight"
        m.const(p + "ssm_d", [1, NH], np.ones(NH))
        m.norm(p + "ssm_norm.weight", [DI // NG, NG])
        m.w(p + "ssm_out.weight", [DI, E])


def _rwkv_common(m, E, L, HS, FF):
    _no_attn(m, E, L, n_ff=FF, ctx=1048576)
    m.f32("{a}.attention.layer_norm_epsilon", 1e-5)
    m.u32("{a}.wkv.head_size", HS)
    m.embd(E)  # output.weight is REQUIRED (no tying)
    m.norm("token_embd_norm.weight", E)      # "ln0" after the embedding, with bias
    m.vec("token_embd_norm.bias", E)
    m.vec("output_norm.bias", E)


def _rwkv_ln(m, i, E):
    p = f"blk.{i}."
    for n in ("attn_norm", "attn_norm_2"):
        m.norm(p + n + ".weight", E)
        m.vec(p + n + ".bias", E)


def rwkv6(m):
    # RWKV-6 "Finch": time mix (data-dependent lerp via LoRA w1/w2, decay LoRA), channel mix; lerps fused as the converter does
    E, L, HS, FF, TM, TD = 64, 2, 32, 224, 32, 64
    _rwkv_common(m, E, L, HS, FF)
    m.u32("{a}.time_mix_extra_dim", TM)
    m.u32("{a}.time_decay_extra_dim", TD)
    m.u32("{a}.rescale_every_n_layers", 6)
    for i in range(L):
        p = f"blk.{i}."
        _rwkv_ln(m, i, E)
        m.w(p + "time_mix_w1.weight", [E, TM * 5], scale=0.1)
        m.w(p + "time_mix_w2.weight", [TM, E, 5], scale=0.1)
        m.vec(p + "time_mix_lerp_x.weight", [E, 1, 1], scale=0.2, offset=0.5)
        m.vec(p + "time_mix_lerp_fused.weight", [E, 1, 1, 5], scale=0.2, offset=0.5)
        m.vec(p + "time_mix_first.weight", [HS, E // HS], scale=0.5)   # "u" bonus
        m.vec(p + "time_mix_decay.weight", E, scale=0.5, offset=-1.0)  # w = exp(-exp(decay))
        m.w(p + "time_mix_decay_w1.weight", [E, TD], scale=0.1)
        m.w(p + "time_mix_decay_w2.weight", [TD, E], scale=0.1)
        for n in ("key", "value", "receptance", "gate"):
            m.w(p + f"time_mix_{n}.weight", [E, E])
        m.norm(p + "time_mix_ln.weight", E)
        m.vec(p + "time_mix_ln.bias", E)
        m.w(p + "time_mix_output.weight", [E, E])
        m.vec(p + "channel_mix_lerp_k.weight", [E, 1, 1], scale=0.2, offset=0.5)
        m.vec(p + "channel_mix_lerp_r.weight", [E, 1, 1], scale=0.2, offset=0.5)
        m.w(p + "channel_mix_key.weight", [E, FF])
        m.w(p + "channel_mix_value.weight", [FF, E])
        m.w(p + "channel_mix_receptance.weight", [E, E])


def rwkv7(m):
    # RWKV-7 "Goose": LoRAs for decay (w), in-context LR (a), value-residual mix (v; layer 0's is a dummy) and gate (g)
    E, L, HS, FF = 64, 2, 32, 256
    RD, RA, RV, RG = 32, 32, 32, 32
    _rwkv_common(m, E, L, HS, FF)
    m.u32("{a}.attention.decay_lora_rank", RD)
    m.u32("{a}.attention.iclr_lora_rank", RA)
    m.u32("{a}.attention.value_residual_mix_lora_rank", RV)
    m.u32("{a}.attention.gate_lora_rank", RG)
    for i in range(L):
        p = f"blk.{i}."
        _rwkv_ln(m, i, E)
        for n, r in (("w", RD), ("a", RA), ("v", RA if i == 0 else RV)):
            m.vec(p + f"time_mix_{n}0.weight", E, scale=0.5)
            m.w(p + f"time_mix_{n}1.weight", [E, r], scale=0.1)
            m.w(p + f"time_mix_{n}2.weight", [r, E], scale=0.1)
        m.w(p + "time_mix_g1.weight", [E, RG], scale=0.1)
        m.w(p + "time_mix_g2.weight", [RG, E])
        m.vec(p + "time_mix_lerp_fused.weight", [E, 1, 1, 6], scale=0.2, offset=0.5)  # r w k v a g
        m.vec(p + "time_mix_k_k.weight", E, scale=0.1, offset=0.85)
        m.vec(p + "time_mix_k_a.weight", E, scale=0.1, offset=1.0)
        m.vec(p + "time_mix_r_k.weight", E, scale=0.5)   # [head_size * n_head], flattened
        for n in ("key", "value", "receptance"):
            m.w(p + f"time_mix_{n}.weight", [E, E])
        m.norm(p + "time_mix_ln.weight", E)
        m.vec(p + "time_mix_ln.bias", E)
        m.w(p + "time_mix_output.weight", [E, E])
        m.vec(p + "channel_mix_lerp_k.weight", [E, 1, 1], scale=0.2, offset=0.5)
        m.w(p + "channel_mix_key.weight", [E, FF])
        m.w(p + "channel_mix_value.weight", [FF, E])


def qwen35moe(m):
    # Qwen3.5-MoE (35B-A3B-like): qwen35's GDN/gated-attention stack, every FFN routed experts +
    # sigmoid-gated shared expert: qwen3next's stack with qwen35's M-RoPE sections
    qwen3next(m, qwen35=True)


def lfm2moe(m):
    # LFM2-8B-A1B-like: lfm2's conv/attention stack; 1 dense lead layer, then sigmoid-routed experts with selection bias
    E, L, H, FF, LC = 64, 4, 4, 128, 3
    NE, NU, FFE = 4, 2, 32
    kv = [0, 0, 2, 0]
    D = E // H
    m.common(E, L, H, kv, FF)
    m.u32("{a}.rope.dimension_count", D)
    m.u32("{a}.shortconv.l_cache", LC)
    m.u32("{a}.leading_dense_block_count", 1)
    m.u32("{a}.expert_count", NE)
    m.u32("{a}.expert_used_count", NU)
    m.u32("{a}.expert_feed_forward_length", FFE)   # required
    m.u32("{a}.expert_gating_func", 2)             # required; 2 = sigmoid
    m.bool("{a}.expert_weights_norm", True)
    m.embd(E, output=False, output_norm="token_embd_norm.weight")
    for i in range(L):
        p = f"blk.{i}."
        m.norm(p + "attn_norm.weight", E)
        m.norm(p + "ffn_norm.weight", E)
        if i < 1:
            m.ffn(i, E, FF)
        else:
            m.experts(i, E, FFE, NE)
            m.vec(p + "exp_probs_b.bias", NE)
        if kv[i]:
            m.norm(p + "attn_q_norm.weight", D)
            m.norm(p + "attn_k_norm.weight", D)
            m.qkv(i, E, E, kv[i] * D, kv[i] * D)
            m.w(p + "attn_output.weight", [E, E])
        else:
            m.w(p + "shortconv.conv.weight", [LC, E], scale=0.5)
            m.w(p + "shortconv.in_proj.weight", [E, 3 * E])
            m.w(p + "shortconv.out_proj.weight", [E, E])


def gemma4_shared(m):
    # E2B-like KV sharing: the last NS layers have no K/V of their own; llama.cpp points each at the KV cache of the
    # last non-shared layer of the same kind (layer n_kv-2 for sliding, n_kv-1 for full), so those must be SWA then full
    E, L, FF, NS = 64, 6, 128, 2
    H, KV_SWA, KV_FULL = 4, 2, 1
    D_SWA, D_FULL = 16, 32
    PL = 8
    swa = [True, True, True, False, True, False]
    n_kv = L - NS
    assert swa[n_kv - 2] and not swa[n_kv - 1]
    kv = [KV_SWA if s else KV_FULL for s in swa]
    m.common(E, L, H, kv, FF, head_dim=D_FULL, eps=1e-6, rope_base=1e6)
    m.u32("{a}.attention.key_length_swa", D_SWA)
    m.u32("{a}.attention.value_length_swa", D_SWA)
    m.u32("{a}.rope.dimension_count", D_FULL)
    m.u32("{a}.rope.dimension_count_swa", D_SWA)
    m.f32("{a}.rope.freq_base_swa", 10000.0)
    m.u32("{a}.attention.sliding_window", 16)
    m.arr("{a}.attention.sliding_window_pattern", swa)
    m.u32("{a}.attention.shared_kv_layers", NS)
    m.u32("{a}.embedding_length_per_layer_input", PL)
    m.f32("{a}.final_logit_softcapping", 30.0)
    m.embd(E, output=False)
    m.w("per_layer_token_embd.weight", [PL * L, VOCAB], scale=1.0)
    m.w("per_layer_model_proj.weight", [E, PL * L])
    m.norm("per_layer_proj_norm.weight", PL)
    n_rot_pairs = D_FULL // 8
    m.const("rope_freqs.weight", [D_FULL // 2], [1.0] * n_rot_pairs + [1e30] * (D_FULL // 2 - n_rot_pairs))
    for i in range(L):
        p = f"blk.{i}."
        D = D_SWA if swa[i] else D_FULL
        m.norm(p + "attn_norm.weight", E)
        m.w(p + "attn_q.weight", [E, H * D])
        m.norm(p + "attn_q_norm.weight", D)
        if i < n_kv:  # shared layers: no attn_k / attn_v / attn_k_norm (not required there, and unused)
            m.w(p + "attn_k.weight", [E, kv[i] * D])
            m.w(p + "attn_v.weight", [E, kv[i] * D])
            m.norm(p + "attn_k_norm.weight", D)
        m.w(p + "attn_output.weight", [H * D, E])
        m.norm(p + "post_attention_norm.weight", E)
        m.const(p + "layer_output_scale.weight", [1], [0.9])
        m.norm(p + "ffn_norm.weight", E)
        m.ffn(i, E, FF)
        m.norm(p + "post_ffw_norm.weight", E)
        m.w(p + "inp_gate.weight", [E, PL])
        m.w(p + "proj.weight", [PL, E])
        m.norm(p + "post_norm.weight", E)


RECIPES = {
    "mistral3": ("mistral3", mistral3),
    "smollm3": ("smollm3", smollm3),
    "qwen35": ("qwen35", qwen35),
    "qwen3next": ("qwen3next", qwen3next),
    "gpt-oss": ("gpt-oss", gpt_oss),
    "gemma4": ("gemma4", lambda m: gemma4(m, moe=False, ple=True)),
    "gemma4-moe": ("gemma4", lambda m: gemma4(m, moe=True, ple=False)),
    # K/V rows of other widths on sliding and global layers: 2 x 16 = 32 against 2 x 32 = 64 (the
    # head size differs), and 1 x 16 = 16 against 2 x 64 = 128 (heads and head size both)
    "gemma4-uneven": ("gemma4", lambda m: gemma4(m, kv_full=2)),
    "gemma4-uneven2": ("gemma4", lambda m: gemma4(m, kv_swa=1, kv_full=2, d_full=64)),
    "gemma4-uneven3": ("gemma4", lambda m: gemma4(m, kv_swa=4, kv_full=1, d_swa=32, d_full=64)),
    "llama4": ("llama4", llama4),
    "deepseek2": ("deepseek2", deepseek2),
    "granitehybrid": ("granitehybrid", lambda m: granitehybrid(m, moe=True)),
    "granitehybrid-dense": ("granitehybrid", lambda m: granitehybrid(m, moe=False)),
    "lfm2": ("lfm2", lfm2),
    "mamba": ("mamba", mamba),
    "mamba2": ("mamba2", mamba2),
    "rwkv6": ("rwkv6", rwkv6),
    "rwkv7": ("rwkv7", rwkv7),
    "qwen35moe": ("qwen35moe", qwen35moe),
    "lfm2moe": ("lfm2moe", lfm2moe),
    "gemma4-shared": ("gemma4", gemma4_shared),
}


def build(name, out_dir, f16=False, k_bias=0.0, wide=False):
    """Writes RECIPES[name]'s model into out_dir (k_bias: with attn_k.bias of that spread;
    wide: Tiny.wide); returns its path."""
    arch, fn = RECIPES[name]
    m = Tiny(arch, f16=f16, k_bias=k_bias, wide=wide)
    fn(m)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(str(out_dir), f"tiny-{name}{'-f16' if f16 else ''}{'-kb' if k_bias else ''}{'-wide' if wide else ''}.gguf")
    m.write(path)
    return path
