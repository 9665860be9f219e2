"""Snapshot settings compared pairwise over many windows (a benchmark, not a
test): differences of 0.001 in KL are below what one 128-step run resolves
on Gemma 3 270M (any perturbation of its K/V moves KL by about that), so
each setting runs on every window of 1000 + 128 tokens of our three texts,
windows STEP tokens apart (BOS, then the text from the window's start), and
the paired differences against the first setting are reported with their
standard errors.  Settings are NAME:SWITCHES (encode-kvdump switches after
--model); default: the defaults against RoPE-aware offsets off, uniform
cells everywhere and the small preset with Lloyd-Max cells.
TQ_ORACLES/bin/python3 tests/bench/kv_windows.py [--step=300] [NAME:SWITCHES ...]"""
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import TQ, gemma  # noqa: E402
from _llama_util import compare, continuation_logits, open_llm, save_state  # noqa: E402

import numpy as np  # noqa: E402

PROMPTS = sorted((HERE.parent / "oracle" / "prompts").glob("*.txt")) + sorted((HERE / "prompts").glob("*.txt"))
STEP = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--step=")), 300)
ARGS = [a.split(":", 1) for a in sys.argv[1:] if not a.startswith("--")]
SETTINGS = ARGS or [("default", ""), ("mean offsets", "--k-offset mean"), ("uniform cells", "--cells uniform"),
                    ("small", "--preset small"), ("small, Lloyd-Max", "--preset small --cells lloyd-max")]


def main():
    g = gemma()
    llm = open_llm(g, 1400)
    res = {name: [] for name, _ in SETTINGS}
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        for p in PROMPTS:
            toks = llm.tokenize(p.read_bytes(), add_bos=True)
            for off in range(0, len(toks) - 1129 + 1, STEP):
                w = toks[:1129] if off == 0 else [toks[0]] + toks[off + 1 : off + 1129]
                save_state(g, w[:1000], d / "s.ggsn", llm=llm)
                ref = continuation_logits(g, d / "s.ggsn", w[1000:-1], llm=llm)
                for name, sw in SETTINGS:
                    subprocess.run([TQ, "encode-kvdump", d / "s.ggsn", "-q", "-o", d / "x.tqkv", "--model", g, *sw.split()],
                                   check=True)
                    subprocess.run([TQ, "decode-kvdump", d / "x.tqkv", "-q", "-o", d / "x.ggsn"], check=True)
                    bits = 8 * (d / "x.tqkv").stat().st_size / (18 * 2 * 256 * 1000)  # Gemma: 18 layers x K, V x 256
                    res[name].append((*compare(ref, continuation_logits(g, d / "x.ggsn", w[1000:-1], llm=llm)), bits))
                    print(f"{p.stem} +{off} {name}: KL {res[name][-1][0]:.4f} top-1 {res[name][-1][1]:.3f}", flush=True)
    base = np.array(res[SETTINGS[0][0]])
    print(f"\n{len(base)} windows of 1000 + 128 tokens, {STEP} apart\n")
    print("| setting | bits per K/V value | mean KL | top-1 | KL - first | top-1 - first |")
    print("|---|---|---|---|---|---|")
    for name, _ in SETTINGS:
        a = np.array(res[name])
        dk, dt = a[:, 0] - base[:, 0], a[:, 1] - base[:, 1]
        se = lambda x: x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else 0.0
        print(f"| {name} | {a[:, 2].mean():.3f} | {a[:, 0].mean():.5f} | {a[:, 1].mean():.1%} | "
              f"{dk.mean():+.5f} ± {se(dk):.5f} | {dt.mean():+.2%} ± {se(dt):.2%} |")


main()
