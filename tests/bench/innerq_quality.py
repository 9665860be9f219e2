"""What calibrate-innerq buys (a benchmark, not a test).  Calibrate on one
text, evaluate on another: the KV state after N_PROMPT tokens of the
calibration text gives the scales (`tq calibrate-innerq --model M STATE -o
S.gguf --fold F.gguf`), and the evaluation text's first N_PROMPT tokens
plus the next 128 (teacher forcing) are compared, as next-token
distributions, with the original model's f16-cache run:
- runtime caches: stock llama.cpp's q4_0 and q8_0 KV caches on the original
  and on the folded model (the whole evaluation text runs through the
  quantized cache, as a server would run it);
- snapshots: the evaluation state encoded at a preset with and without
  `--innerq S.gguf`, decoded, restored and continued (against the
  uncompressed restore), bits per K/V value of the whole file;
- beside the rounding floor (the same run with flash attention off).
Rules: qk (Q-aware, the default), kv (K energy alone), fork (the TurboQuant+
fork's formula, snapshots only: not foldable), and qk with V scales through
W_o (--v wo; folding V into Gemma's quantized W_v/W_o needs requantization,
which is measured too).  Models: Gemma 3 270M on three prompts of ours
(each calibrates the next), stories260K, and a generated llama with outlier
K channels.  Prints Markdown; TQ_ORACLES/bin/python3 tests/bench/innerq_quality.py
[--quick] [--only=gemma,stories,generated]."""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import STORIES, TQ, gemma  # noqa: E402
from _llama_util import compare, continuation_logits, open_llm, save_state  # noqa: E402
from _models import make_model  # noqa: E402

import numpy as np  # noqa: E402

N_PROMPT, N_CONT = 1000, 128
Q4_0, Q8_0 = 2, 8
PROMPTS = sorted((HERE.parent / "oracle" / "prompts").glob("*.txt")) + sorted((HERE / "prompts").glob("*.txt"))
QUICK = "--quick" in sys.argv
ONLY = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--only=")), ["gemma", "stories", "generated"])


def tq(*a):
    p = subprocess.run([TQ, *map(str, a)], capture_output=True, text=True)
    assert p.returncode == 0, (a, p.stderr)
    return p


def run(model, toks, type_kv=None, flash=True):
    """logits of the last N_CONT positions, the whole text through one cache"""
    try:
        llm = open_llm(model, N_PROMPT + N_CONT + 16, type_kv, flash)
    except Exception:  # e.g. a quantized cache the head size does not allow
        return None
    llm.eval(toks)
    out = np.array(llm.scores[N_PROMPT : N_PROMPT + N_CONT], dtype=np.float64)
    del llm
    return out


def fmt(r):
    return "n/a" if r is None else f"{r[0]:.4f} / {r[1]:.1%}"


def runtime_rows(d, model, calib_state, ev, rules):
    ref = run(model, ev)
    rows = [("rounding floor (flash attention off)", "f16", fmt(compare(ref, run(model, ev, flash=False))))]
    for t, name in ((Q8_0, "q8_0"), (Q4_0, "q4_0")):
        got = run(model, ev, t)
        rows.append(("original model", name, fmt(None if got is None else compare(ref, got))))
    for rule, extra in rules:
        folded = d / "fold.gguf"
        p = tq("calibrate-innerq", "--model", model, calib_state, "-o", d / "s.gguf", "--fold", folded, *extra)
        left = " (" + "; ".join(l.split(": ", 1)[1] for l in p.stderr.splitlines() if "not folded" in l) + ")"
        for t, name in ((None, "f16"), (Q8_0, "q8_0"), (Q4_0, "q4_0")):
            got = run(folded, ev, t)
            rows.append((f"folded, {rule}{left if len(left) > 3 else ''}", name,
                         fmt(None if got is None else compare(ref, got))))
    return rows


def snapshot_rows(d, model, calib_state, ev, rules, presets, llm):
    state = d / "ev.ggsn"
    save_state(model, ev[:N_PROMPT], state, llm=llm)
    ref = continuation_logits(model, state, ev[N_PROMPT:-1], llm=llm)
    rows = []
    for preset in presets:
        for rule, extra in [("none", None)] + rules:
            args = []
            if extra is not None:
                tq("calibrate-innerq", "--model", model, calib_state, "-o", d / "s.gguf", *extra)
                args = ["--innerq", d / "s.gguf"]
            tq("encode-kvdump", state, "-q", "-o", d / "x.tqkv", "--model", model, "--preset", preset, *args)
            tq("decode-kvdump", d / "x.tqkv", "-q", "-o", d / "x.ggsn")
            bits = json.loads(tq("inspect", "--json", d / "x.tqkv").stdout)["bits_per_value"]
            got = compare(ref, continuation_logits(model, d / "x.ggsn", ev[N_PROMPT:-1], llm=llm))
            rows.append((preset, rule, f"{bits:.2f}", fmt(got)))
    return rows


def table(head, rows):
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print()


def model_section(d, title, model, texts, rules_rt, rules_snap, presets):
    llm = open_llm(model, N_PROMPT + N_CONT + 16)
    for i in range(len(texts) if not QUICK else 1):
        cname, calib = texts[i]
        ename, ev = texts[(i + 1) % len(texts)]
        ev = ev[: N_PROMPT + N_CONT]
        cstate = d / "calib.ggsn"
        save_state(model, calib[:N_PROMPT], cstate, llm=llm)
        print(f"### {title}: calibrated on {cname}, evaluated on {ename}\n")
        print(f"{N_PROMPT} + {N_CONT} tokens; mean KL(reference || test) / top-1 agreement.\n")
        table(["model", "KV cache", "KL / top-1 vs the original's f16 run"], runtime_rows(d, model, cstate, ev, rules_rt))
        table(["snapshot preset", "InnerQ scales", "bits per K/V value", "KL / top-1 vs the uncompressed restore"],
              snapshot_rows(d, model, cstate, ev, rules_snap, presets, llm))
    del llm


def tokens(model, paths):
    v = open_llm(model, 64)
    out = [(p.name, v.tokenize(p.read_bytes(), add_bos=True)) for p in paths]
    del v
    return [(n, t) for n, t in out if len(t) >= N_PROMPT + N_CONT]


with tempfile.TemporaryDirectory() as d:
    d = Path(d)
    qk, kv, fork, vwo = ("qk", []), ("kv", ["--method", "kv"]), ("fork", ["--method", "fork"]), ("qk + V (W_o)", ["--v", "wo"])
    head = ("qk per KV head", ["--per", "head"])  # Gemma has one KV head: the same as per layer
    if "gemma" in ONLY:
        G = gemma()
        model_section(d, "Gemma 3 270M (Q4_K_M)", G, tokens(G, PROMPTS),
                      [qk, kv, ("qk + V (W_o), requantized W_v/W_o", ["--v", "wo", "--allow-requantize"])],
                      [qk, kv, fork, vwo], ["balanced", "small"])
    if "stories" in ONLY:
        model_section(d, "stories260K", STORIES, tokens(STORIES, PROMPTS[:2]), [qk, head, kv, vwo],
                      [qk, head, kv, fork, vwo], ["balanced", "small"])
    if "generated" in ONLY:
        gen = d / "gen.gguf"
        make_model(gen, STORIES, 128, n_head=8, n_head_kv=2, n_layer=4, seed=7, gains=True, k_outliers=6)
        model_section(d, "generated llama (head 128, GQA 8/2, 6 outlier K pairs per head)", gen,
                      tokens(gen, PROMPTS[:2]), [qk, head, kv], [qk, head, kv, fork], ["balanced", "small"])
