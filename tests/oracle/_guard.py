"""What the long-context guards (kv_long_gemma.py, kv_long_smollm2.py) share, not a test
itself: a session of a held-out text (tests/oracle/_texts.py) cached once, its reference
restore and floor, a snapshot's restore against it, and the plan's rows."""
import subprocess

import llama_cpp

from _env import LLAMA_THREADS, CACHE, TQ
from _llama_util import cached_session, compare
from kv_long import run as restore_logits  # (restore, drop the last cell, re-feed)
import _texts


def guard_session(model, prefix, text, tokens, steps):
    """A context of `model`, the session of held-out text `text`'s first `tokens` tokens
    (cached as PREFIX-TEXT-TOKENS.ggsn), the next `steps` tokens, the uncompressed restore's
    logits and the floor (that restore fed one token a call)."""
    assert _texts.split(text) == "judge", f"{text} is a text to choose on, not a held-out one"
    llm = llama_cpp.Llama(model_path=str(model), n_ctx=tokens + 256, n_batch=512, logits_all=False,
                          verbose=False, flash_attn=True, **LLAMA_THREADS)
    state = CACHE.parent / "long" / f"{prefix}-{text}-{tokens}.ggsn"
    cont = cached_session(llm, _texts.tokens(llm, text), tokens, steps, state)
    ref = restore_logits(llm, state, cont)
    floor = compare(ref, restore_logits(llm, state, cont, one_by_one=True))[0]
    print(f"{text}, {tokens} tokens, {steps} steps: floor (one token a call) KL {floor:.5f}")
    return llm, state, cont, ref, floor


def restored(llm, state, cont, ref, model, d, values, *options):
    """The state encoded with `options`, decoded and restored: bits per K/V value (of `values`),
    KL against the uncompressed restore and top-1 agreement."""
    snap = d / "x.tqkv"
    subprocess.run([TQ, "encode-kvdump", state, "-q", "-o", snap, "--model", model, *options], check=True)
    subprocess.run([TQ, "decode-kvdump", snap, "-q", "-o", d / "x.ggsn"], check=True)
    kl, top1 = compare(ref, restore_logits(llm, d / "x.ggsn", cont))
    return 8 * snap.stat().st_size / values, kl, top1


def plan_rows(state, model, preset):
    """The dry run's plan (its text) and its tensor rows."""
    plan = subprocess.run([TQ, "encode-kvdump", state, "--dry-run", "--model", model, "--preset", preset],
                          capture_output=True, text=True, check=True).stdout
    return plan, [ln for ln in plan.splitlines() if ln.startswith("  state")]
