"""kv_texts.py [--model=gemma|smollm2] [--tokens=N] [--texts=judge|choose|all|NAME,...] [--steps=512]
[--json=PATH] [--svg=PATH [--from=JSON,...]] [NAME:SWITCHES ...] - snapshot settings judged on the text set (issue 36; a
benchmark, not a test): each text's session (tests/bench/long_sessions.py: Gemma 3 270M 24576
tokens, or 1536 with --tokens=1536; SmolLM2-135M 7168) encoded with SWITCHES (after --model),
decoded, restored in llama.cpp, its last cell re-fed with the next `steps` tokens in one batch
(teacher forcing).  Mean KL and top-1 against the uncompressed restore fed the same way, over
the first 128 steps and over all of them, beside the floor (that restore fed one token a call;
cached per session under ~/.cache/tq/long).  Prints a row a text and setting, then each
setting's worst text by KL / floor at 128 and at `steps` steps.  --json writes every row;
--svg draws bits per value against KL / floor at `steps` steps, a point a text and the spread
across texts as a bar a setting (--from: the rows of earlier --json runs, drawn without
measuring; a model's file each, one panel each).  The held-out texts (`judge`,
the default) are the ones to report; `choose` the ones to tune on.
TQ_ORACLES/bin/python3 tests/bench/kv_texts.py --model=smollm2 "balanced:" "small:--preset small" """
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import TQ  # noqa: E402
from long_sessions import MODELS, session_path, split_options, text_names  # noqa: E402
from kv_long import batch_logits, restore  # noqa: E402
import llama_cpp  # noqa: E402

OPTS, ARGS = split_options(("--model=", "--tokens=", "--texts=", "--steps=", "--json=", "--svg=", "--from="))
MODEL = OPTS.get("--model", "gemma")
TOKENS = int(OPTS.get("--tokens", MODELS[MODEL]["tokens"]))
STEPS = int(OPTS.get("--steps", 512))
SHORT = 128  # the short measure, the first steps of the same batch
SETTINGS = [a.split(":", 1) if ":" in a else (a, "") for a in ARGS] or [("balanced", "")]


def log_probs(logits):
    """log-softmax a row, float32 [steps + 1, vocab] (the reference is kept in this form)."""
    out = np.empty(logits.shape, np.float32)
    for r in range(0, len(logits), 64):
        x = logits[r : r + 64]
        x = x - x.max(axis=1, keepdims=True)
        out[r : r + 64] = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
    return out


def step_kl(ref_lp, logits):
    """KL(ref || test) a step (float64) and whether the top tokens agree."""
    test_lp = log_probs(logits)
    kl = np.empty(len(ref_lp))
    for r in range(0, len(ref_lp), 64):
        p = ref_lp[r : r + 64].astype(np.float64)
        q = test_lp[r : r + 64].astype(np.float64)
        kl[r : r + 64] = (np.exp(p) * (p - q)).sum(axis=1)
    return kl, ref_lp.argmax(1) == test_lp.argmax(1)


def logits_of(llm, state, cont, one_by_one=False):
    toks, n = restore(llm, state)
    return batch_logits(llm, [toks[n]] + cont, n, one_by_one)


def floor_of(llm, state, cont, ref_lp):
    """The floor's KL a step, cached beside the session (it depends on nothing tq does)."""
    path = state.with_suffix(f".floor{len(cont)}-{llama_cpp.__version__}.npy")
    if not path.exists():
        kl, _ = step_kl(ref_lp, logits_of(llm, state, cont, one_by_one=True))
        np.save(path, kl)
    return np.load(path)


def measure(llm, g, state, cont, ref_lp, switches, d):
    """(bits per K/V value, KL a step, top-1 a step, encode s, decode s) of one setting; switches
    that start with @PATH run the tq at PATH (another build) for both."""
    sw = switches.split()
    tq = sw.pop(0)[1:] if sw and sw[0].startswith("@") else TQ
    t0 = time.time()
    subprocess.run([tq, "encode-kvdump", state, "-q", "-o", d / "x.tqkv", "--model", g, *sw], check=True)
    t1 = time.time()
    subprocess.run([tq, "decode-kvdump", d / "x.tqkv", "-q", "-o", d / "x.ggsn"], check=True)
    t2 = time.time()
    bits = 8 * (d / "x.tqkv").stat().st_size / (MODELS[MODEL]["kv_values"] * TOKENS)
    kl, top = step_kl(ref_lp, logits_of(llm, d / "x.ggsn", cont))
    return bits, kl, top, t1 - t0, t2 - t1


def svg(path, panels):
    """panels: [(title, rows)]; each panel bits (x) against KL / floor (y, log), a colour a
    setting, a dot a text, a bar from the best text to the worst."""
    W, H, L, B, T = 420, 330, 56, 40, 28
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W * len(panels)}" height="{H}" '
           f'font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/>']
    for i, (title, rows) in enumerate(panels):
        x0 = i * W
        xs = [r["bits"] for r in rows]
        ys = [np.log10(r["x"]) for r in rows]
        bx0, bx1 = min(xs) - 0.3, max(xs) + 0.3
        y0, y1 = min(0, min(ys)) - 0.05, max(ys) + 0.1
        X = lambda x: x0 + L + (x - bx0) / (bx1 - bx0) * (W - L - 20)  # noqa: E731
        Y = lambda v: H - B - (np.log10(v) - y0) / (y1 - y0) * (H - B - T)  # noqa: E731
        out += [f'<text x="{x0 + W / 2}" y="16" text-anchor="middle" font-weight="bold">{title}</text>',
                f'<line x1="{x0 + L}" y1="{H - B}" x2="{x0 + W - 20}" y2="{H - B}" stroke="black"/>',
                f'<line x1="{x0 + L}" y1="{H - B}" x2="{x0 + L}" y2="{T}" stroke="black"/>',
                f'<text x="{x0 + W / 2}" y="{H - 8}" text-anchor="middle">bits per K/V value</text>',
                f'<text x="{x0 + 14}" y="{H / 2}" transform="rotate(-90 {x0 + 14} {H / 2})" '
                f'text-anchor="middle">KL / floor, {STEPS} steps (log)</text>']
        for b in np.arange(np.ceil(bx0 * 2) / 2, bx1, 0.5):
            out.append(f'<text x="{X(b):.0f}" y="{H - B + 14}" text-anchor="middle">{b:g}</text>')
        for v in (0.5, 1, 1.5, 2, 3, 5, 10, 20):
            if y0 <= np.log10(v) <= y1:
                out.append(f'<line x1="{x0 + L}" x2="{x0 + W - 20}" y1="{Y(v):.1f}" y2="{Y(v):.1f}" '
                           f'stroke="#ddd"/><text x="{x0 + L - 6}" y="{Y(v) + 4:.1f}" text-anchor="end">{v}</text>')
        names = list(dict.fromkeys(r["setting"] for r in rows))
        for j, name in enumerate(names):
            col = colours[j % len(colours)]
            mine = [r for r in rows if r["setting"] == name]
            bits = np.mean([r["bits"] for r in mine])
            lo, hi = min(r["x"] for r in mine), max(r["x"] for r in mine)
            out.append(f'<line x1="{X(bits):.1f}" x2="{X(bits):.1f}" y1="{Y(lo):.1f}" y2="{Y(hi):.1f}" '
                       f'stroke="{col}" stroke-width="2"/>')
            out += [f'<circle cx="{X(r["bits"]):.1f}" cy="{Y(r["x"]):.1f}" r="3" fill="{col}"><title>'
                    f'{r["text"]}</title></circle>' for r in mine]
            out.append(f'<text x="{x0 + W - 150}" y="{T + 14 * j}" fill="{col}">{name}</text>')
    Path(path).write_text("\n".join(out) + "\n</svg>\n")


def main():
    if "--from" in OPTS:  # only redraw
        panels = []
        for f in OPTS["--from"].split(","):
            rows = [json.loads(ln) for ln in Path(f).read_text().splitlines() if ln.strip()]
            panels.append((rows[0].get("title", Path(f).stem), rows))
        svg(OPTS["--svg"], panels)
        return
    g = MODELS[MODEL]["path"]()
    llm = llama_cpp.Llama(model_path=str(g), n_ctx=MODELS[MODEL]["n_ctx"], n_batch=STEPS + 1, n_ubatch=512,
                          logits_all=False, verbose=False, flash_attn=True)
    texts = text_names(OPTS.get("--texts", "judge"))
    rows = []  # (setting, text, bits, kl128, x128, kl, x, top1)
    print(f"{MODEL}, {TOKENS} tokens, {SHORT} and {STEPS} teacher-forced steps, texts {','.join(texts)}",
          flush=True)
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        for text in texts:
            state = session_path(text, TOKENS, MODEL)
            if not state.exists():
                raise SystemExit(f"{state} not found: python3 tests/bench/long_sessions.py --model {MODEL} "
                                 f"--tokens {TOKENS} --texts {text}")
            cont = np.load(state.with_suffix(".cont.npy")).tolist()[:STEPS]
            ref_lp = log_probs(logits_of(llm, state, cont))
            floor = floor_of(llm, state, cont, ref_lp)
            f128, fall = floor[1 : SHORT + 1].mean(), floor[1:].mean()
            print(f"{text}: floor KL {f128:.5f} ({SHORT} steps) {fall:.5f} ({STEPS})", flush=True)
            for name, sw in SETTINGS:
                bits, kl, top, te, td_ = measure(llm, g, state, cont, ref_lp, sw, d)
                # row 0 is the re-fed last cell of the session; the steps are rows 1..
                k128, kall = kl[1 : SHORT + 1].mean(), kl[1:].mean()
                row = dict(title=f"{MODEL}, {TOKENS} tokens", setting=name, switches=sw, text=text, bits=bits, kl128=k128, x128=k128 / f128,
                           kl=kall, x=kall / fall, top1=float(top[1:].mean()), floor128=f128, floor=fall,
                           encode_s=te, decode_s=td_)
                rows.append(row)
                print(f"  {name}: {bits:.3f} bits, KL {k128:.5f} / {kall:.5f} ({row['x128']:.2f}x / "
                      f"{row['x']:.2f}x floor), top-1 {row['top1']:.1%}", flush=True)
    report(rows, texts)
    if "--json" in OPTS:
        Path(OPTS["--json"]).write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    if "--svg" in OPTS:
        svg(OPTS["--svg"], [(f"{MODEL}, {TOKENS} tokens", rows)])


def report(rows, texts):
    print(f"\n{MODEL}, {TOKENS} tokens; KL / floor at {SHORT} and {STEPS} teacher-forced steps\n")
    print("| setting | switches | " + " | ".join(texts) + f" | worst ({SHORT} / {STEPS}) | bits (most) |")
    print("|---|---|" + "---|" * len(texts) + "---|---|")
    for name, sw in SETTINGS:
        mine = {r["text"]: r for r in rows if r["setting"] == name}
        cells = [f"{mine[t]['bits']:.2f} b, {mine[t]['x128']:.2f} / {mine[t]['x']:.2f}x" for t in texts]
        w128 = max(mine[t]["x128"] for t in texts)
        wall = max(mine[t]["x"] for t in texts)
        worst = f"{w128:.2f} / {wall:.2f}x"
        print(f"| {name} | `{sw}` | " + " | ".join(cells) + f" | {worst} | "
              f"{max(mine[t]['bits'] for t in texts):.3f} |")


if __name__ == "__main__":
    main()
