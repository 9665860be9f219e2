"""What the long-context guards (kv_long_gemma.py, kv_long_smollm2.py) share, not a test
itself: a session of our own texts cached once, its reference restore and floor, a snapshot's
restore against it, and the plan's rows."""
import hashlib
import subprocess

import llama_cpp

from _env import CACHE, ROOT, TQ
from _llama_util import cached_session, compare
from kv_long import run as restore_logits  # (restore, drop the last cell, re-feed)

# the prompts of the oracle and bench tests, then the man pages
FILES = sorted((ROOT / "tests" / "oracle" / "prompts").glob("*.txt")) + \
    sorted((ROOT / "tests" / "bench" / "prompts").glob("*.txt")) + sorted((ROOT / "man").glob("*.1"))


def guard_session(model, prefix, tokens, steps):
    """A context of `model`, the session of the texts' first `tokens` tokens (cached as
    PREFIX-HASH.ggsn, keyed by the text's hash), the next `steps` tokens, the uncompressed
    restore's logits and the floor (that restore fed one token a call)."""
    llm = llama_cpp.Llama(model_path=str(model), n_ctx=tokens + 256, n_batch=512, logits_all=False,
                          verbose=False, flash_attn=True)
    text = "\n\n".join(f.read_text() for f in FILES)
    key = hashlib.sha256(text.encode()).hexdigest()[:12]
    state = CACHE.parent / "long" / f"{prefix}-{key}.ggsn"
    cont = cached_session(llm, llm.tokenize(text.encode(), add_bos=True), tokens, steps, state)
    ref = restore_logits(llm, state, cont)
    floor = compare(ref, restore_logits(llm, state, cont, one_by_one=True))[0]
    print(f"{tokens} tokens, {steps} steps: floor (one token a call) KL {floor:.5f}")
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
