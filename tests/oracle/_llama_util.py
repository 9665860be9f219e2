"""Helpers shared by the llama.cpp oracle tests (not a test itself)."""
import ctypes
import io
import os

import numpy as np
import llama_cpp

from _env import LLAMA_THREADS, cache_put, cache_tmp


def open_llm(model, n_ctx=2048, type_kv=None, flash=True):
    """A context that keeps every step's logits; type_kv: the ggml type id of
    the K/V cache (default f16)."""
    kw = {} if type_kv is None else {"type_k": type_kv, "type_v": type_kv}
    return llama_cpp.Llama(model_path=str(model), n_ctx=n_ctx, n_batch=512, logits_all=True, verbose=False,
                           flash_attn=flash, **kw, **LLAMA_THREADS)


def continuation_logits(model, state_path, cont, n_ctx=2048, type_kv=None, llm=None):
    """Restore a session file, drop its last cell, re-feed that token, then
    feed `cont` (teacher forcing); logits of every step.  llm: a context of
    open_llm to reuse (a large vocabulary makes a new one slow), else one is
    made for this call."""
    own = llm is None
    if own:
        llm = open_llm(model, n_ctx, type_kv)
    llm.reset()
    ctx = llm._ctx.ctx
    toks = (llama_cpp.llama_token * 8192)()
    n = ctypes.c_size_t(0)
    assert llama_cpp.llama_state_load_file(ctx, str(state_path).encode(), toks, 8192, ctypes.byref(n)), "restore failed"
    n = n.value
    mem = llama_cpp.llama_get_memory(ctx)
    llama_cpp.llama_memory_seq_rm(mem, 0, n - 1, -1)
    llm.n_tokens = n - 1
    llm.input_ids[: n - 1] = list(toks[: n - 1])
    llm.eval([toks[n - 1]] + list(cont))
    out = np.array(llm.scores[n - 1 : n + len(cont)], dtype=np.float64)
    if own:
        del llm
    return out


def save_state(model, prompt, path, n_ctx=2048, llm=None):
    own = llm is None
    if own:
        llm = llama_cpp.Llama(model_path=str(model), n_ctx=n_ctx, n_batch=512, logits_all=False, verbose=False,
                              flash_attn=True, **LLAMA_THREADS)
    llm.reset()
    llm.eval(prompt)
    arr = (llama_cpp.llama_token * len(prompt))(*prompt)
    assert llama_cpp.llama_state_save_file(llm._ctx.ctx, str(path).encode(), arr, len(prompt))
    if own:
        del llm


def cached_session(llm, toks, tokens, n_cont, state):
    """A session of toks[:tokens] saved once at `state` (a Path; written beside it, then renamed
    into place) with the next n_cont tokens at state.cont.npy, for teacher forcing; returns
    those tokens."""
    cont = state.with_suffix(".cont.npy")
    assert len(toks) >= tokens + n_cont, f"{len(toks)} tokens of text, fewer than {tokens} + {n_cont}"
    if not state.exists():
        state.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_tmp(state)
        save_state(None, toks[:tokens], tmp, llm=llm)
        os.replace(tmp, state)
    if not cont.exists() or len(np.load(cont)) < n_cont:
        buf = io.BytesIO()
        np.save(buf, np.array(toks[tokens : tokens + n_cont], dtype=np.int32))
        cache_put(cont, buf.getvalue())
    return np.load(cont).tolist()[:n_cont]


def log_softmax(x):
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def compare(ref, test):
    """mean KL(ref || test) in nats and top-1 agreement"""
    lp, lq = log_softmax(ref), log_softmax(test)
    kl = (np.exp(lp) * (lp - lq)).sum(axis=1)
    return float(kl.mean()), float((ref.argmax(1) == test.argmax(1)).mean())


def prompt_tokens(fixture_dir, n):
    """The first n prompt tokens of the fixture session p1_f16.ggsn."""
    raw = (fixture_dir / "p1_f16.ggsn").read_bytes()
    count = int.from_bytes(raw[8:12], "little")
    return np.frombuffer(raw[12 : 12 + 4 * count], dtype=np.int32).tolist()[:n]


def prompt_logits(model, prompt, f32_cache=False):
    """Logits of every prompt position, evaluated from scratch.  f32_cache:
    an f32 KV cache (an f16 one rounds K/V, which matters when comparing
    models that should be identical in exact arithmetic)."""
    kw = {"type_k": 0, "type_v": 0} if f32_cache else {}
    llm = llama_cpp.Llama(model_path=str(model), n_ctx=1024, n_batch=512, logits_all=True, verbose=False, **kw, **LLAMA_THREADS)
    llm.eval(prompt)
    out = np.array(llm.scores[: len(prompt)], dtype=np.float64)
    del llm
    return out
