"""Benchmark layer 3 (not a test): what the model does after a restore, per
codec at matched bits.  For stories260K and Gemma 3 270M, on our prompts
(tests/oracle/prompts, >= 1000 tokens where the model's context allows),
the session after the prompt is saved, snapshotted with each codec
(tq, the fork's turbo, TurboAngle, TurboQuant-prod; `tq encode-kvdump
--codec ... --k-bits b --v-bits b`), decoded, restored and fed the next 128
tokens (teacher forcing); next-token distributions are compared with the
uncompressed restore: bits per K/V value (the whole snapshot file), mean
KL(reference || test) and top-1 agreement, beside the rounding floor (the
same run with flash attention off) and llama.cpp's own q8_0 / q4_0 runtime
caches over the same tokens.  Prints a Markdown table.  Needs the oracle
environment: TQ_ORACLES/bin/python3 tests/bench/kv_model_quality.py."""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import STORIES, TQ, gemma  # noqa: E402
from _llama_util import compare, continuation_logits, open_llm, save_state  # noqa: E402

import numpy as np  # noqa: E402

CODECS = [("tq", ["--codec", "tq"]), ("turbo", ["--codec", "turbo"]), ("angle", ["--codec", "angle"]),
          ("prod", ["--codec", "prod"])]
GGML_Q8_0, GGML_Q4_0 = 8, 2


def tq(*args):
    p = subprocess.run([TQ, *map(str, args)], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"tq {' '.join(map(str, args))}: {p.stderr}")
    return p


def runtime_cache(model, toks, n_prompt, type_kv, n_ctx):
    llm = open_llm(model, n_ctx, type_kv=type_kv, flash=True)
    llm.eval(toks)
    out = np.array(llm.scores[n_prompt - 1:len(toks)], dtype=np.float64)
    del llm
    return out


def bench(name, model, n_prompt, n_cont, n_ctx, prompts):
    rows = []
    fa_on, fa_off = open_llm(model, n_ctx, flash=True), open_llm(model, n_ctx, flash=False)
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        for pf in prompts:
            toks = fa_on.tokenize(pf.read_bytes(), add_bos=True)[:n_prompt + n_cont]
            prompt, cont = toks[:n_prompt], toks[n_prompt:]
            state = d / "s.ggsn"
            save_state(model, prompt, state, llm=fa_on)
            ref = continuation_logits(model, state, cont[:-1], llm=fa_on)
            save_state(model, prompt, d / "off.ggsn", llm=fa_off)
            floor = compare(ref, continuation_logits(model, d / "off.ggsn", cont[:-1], llm=fa_off))
            values = json.loads(tq("inspect", "--json", state).stdout)["kv_values"]
            rows.append((pf.name, "rounding floor (flash attention off)", 16.0, *floor))
            full = runtime_cache(model, toks, n_prompt, None, n_ctx)
            for label, t in (("llama.cpp q8_0 cache", GGML_Q8_0), ("llama.cpp q4_0 cache", GGML_Q4_0)):
                try:
                    kl = compare(full, runtime_cache(model, toks, n_prompt, t, n_ctx))
                    rows.append((pf.name, label, 8.5 if t == GGML_Q8_0 else 4.5, *kl))
                except Exception as e:  # a cache type this build cannot run
                    print(f"  {label}: {e}", file=sys.stderr)
            for b in (4, 3, 2):
                for label, extra in CODECS:
                    if label == "prod" and b < 2 or label == "turbo" and not 2 <= b <= 4:
                        continue
                    snap, back = d / "x.tqkv", d / "x.ggsn"
                    p = subprocess.run([TQ, "encode-kvdump", state, "-o", snap, "--model", model, "--k-bits", str(b),
                                        "--v-bits", str(b), "-q", *extra], capture_output=True, text=True)
                    if p.returncode:
                        print(f"  {label} b={b}: {p.stderr.strip()}", file=sys.stderr)
                        continue
                    plan = json.loads(tq("inspect", "--json", snap).stdout)
                    if not any(t["codec"] == label for t in plan["tensors"]):
                        continue  # this codec codes nothing here (turbo needs rows of 128s; tq takes the rest)
                    tq("decode-kvdump", snap, "-o", back, "-q")
                    kl, top1 = compare(ref, continuation_logits(model, back, cont[:-1], llm=fa_on))
                    rows.append((pf.name, f"{label} b={b}", snap.stat().st_size * 8 / values, kl, top1))
                    print(f"  {name} {pf.name} {label} b={b}: {rows[-1][2]:.3f} bits, KL {kl:.5f}, top-1 {top1:.1%}",
                          file=sys.stderr)
    del fa_on, fa_off
    print(f"\n{name}: {n_prompt} prompt + {n_cont} teacher-forced tokens, KL against the uncompressed restore\n")
    print("| prompt | codec | bits per K/V value | mean KL | top-1 |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.2f} | {r[3]:.4f} | {r[4]:.1%} |")
    sys.stdout.flush()


prompts = sorted((HERE.parent / "oracle" / "prompts").glob("*.txt"))
if STORIES.exists():
    bench("stories260K (head size 8)", STORIES, 384, 128, 512, prompts[:1])  # its context is 512 tokens
bench("Gemma 3 270M (head size 256, iSWA)", gemma(), 1200, 128, 1400, prompts)
