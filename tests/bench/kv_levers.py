"""The snapshot levers, each alone and together (a benchmark, not a test):
the README's ablation table.  For each model and prompt: the KV state after
N_PROMPT tokens, encoded with `tq encode-kvdump S --model M --preset P
[lever switches]`, decoded, restored in llama.cpp and fed the next N_CONT
tokens (teacher forcing); mean KL and top-1 against the uncompressed
restore, beside the rounding floor (the whole text evaluated with flash
attention on and off: the same numbers summed in another order; a state
saved with one does not restore into the other).  Bits per K/V value
count the whole file; encode/decode times are medians of 3 (the whole
command, a small state: mostly start-up).  Models: Gemma 3 270M on our three
texts (1000 + 128 tokens), stories260K (its 512-token context: 380 + 128) and
a generated llama with heads of 128 and outlier K channels (1000 + 128
random tokens).  Prints Markdown.
TQ_ORACLES/bin/python3 tests/bench/kv_levers.py [--only=gemma,stories,hd128] [--configs=a,b]"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
sys.path.insert(0, str(HERE))
from _env import STORIES, TQ, gemma  # noqa: E402
from _llama_util import compare, continuation_logits, open_llm, save_state  # noqa: E402
from _models import make_model  # noqa: E402
from _timing import timed  # noqa: E402

import numpy as np  # noqa: E402

PROMPTS = sorted((HERE.parent / "oracle" / "prompts").glob("*.txt")) + sorted((HERE / "prompts").glob("*.txt"))
ONLY = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--only=")), ["gemma", "stories", "hd128"])
PICK = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--configs=")), None)
NONE = ["--innerq", "off", "--sink-cells", "0", "--k-offset", "off"]
CONFIGS = [  # name, preset, encode-kvdump switches
    ("none", "balanced", NONE),
    ("InnerQ scales (auto) alone", "balanced", ["--sink-cells", "0", "--k-offset", "off"]),
    ("first K cell exact alone", "balanced", ["--innerq", "off", "--k-offset", "off"]),
    ("K offsets (mean) alone", "balanced", ["--innerq", "off", "--sink-cells", "0", "--k-offset", "mean"]),
    ("K offsets (RoPE-aware) alone", "balanced", ["--innerq", "off", "--sink-cells", "0", "--k-offset", "rope"]),
    ("all but RoPE-aware offsets: mean offsets (the defaults before)", "balanced", ["--k-offset", "mean"]),
    ("all (the default)", "balanced", []),
    ("all, uniform cells", "balanced", ["--cells", "uniform"]),
    ("all, --k-bits 5 --v-bits 3", "balanced", ["--k-bits", "5", "--v-bits", "3"]),
    ("all, --k-bits 4 --v-bits 3", "balanced", ["--k-bits", "4", "--v-bits", "3"]),
    ("all, --k-bits 3 --v-bits 2", "balanced", ["--k-bits", "3", "--v-bits", "2"]),
    ("small, none", "small", NONE),
    ("small, all, Lloyd-Max cells, planes off", "small", ["--cells", "lloyd-max", "--planes", "off"]),
    ("small, all, Lloyd-Max cells (planes)", "small", ["--cells", "lloyd-max"]),
    ("small, all (the default: uniform cells)", "small", []),
    ("where the error is: all, --k-bits 8", "balanced", ["--k-bits", "8"]),
    ("where the error is: all, --v-bits 8", "balanced", ["--v-bits", "8"]),
]


def tq(*a):
    p = subprocess.run([TQ, *map(str, a)], capture_output=True, text=True)
    assert p.returncode == 0, (a, p.stderr)
    return p


def text_tokens(model, n):
    v = open_llm(model, 64)
    out = [(p.stem, v.tokenize(p.read_bytes(), add_bos=True)[:n]) for p in PROMPTS]
    del v
    return [(name, t) for name, t in out if len(t) == n]


def measure(d, model, prompts, n_prompt):
    """{config: [(bits, kl, top1, enc_s, dec_s) per prompt]}, floors [(kl, top1)]"""
    llm, llm_off = open_llm(model, n_prompt + 160), open_llm(model, n_prompt + 160, flash=False)
    res, floors = {}, []
    for _, toks in prompts:
        state = d / "s.ggsn"
        save_state(model, toks[:n_prompt], state, llm=llm)
        cont = toks[n_prompt:-1]
        ref = continuation_logits(model, state, cont, llm=llm)
        full = []
        for ctx in (llm, llm_off):  # the whole text evaluated, flash attention on and off
            ctx.reset()
            ctx.eval(toks[:-1])
            full.append(np.array(ctx.scores[n_prompt - 1 : len(toks) - 1], dtype=np.float64))
        floors.append(compare(*full))
        for name, preset, extra in CONFIGS:
            if PICK and not any(p in name for p in PICK):
                continue
            enc = [TQ, "encode-kvdump", str(state), "-q", "-o", str(d / "x.tqkv"), "--model", str(model),
                   "--preset", preset, *extra]
            dec = [TQ, "decode-kvdump", str(d / "x.tqkv"), "-q", "-o", str(d / "x.ggsn")]
            te, td = timed(enc), timed(dec)
            bits = json.loads(tq("inspect", "--json", d / "x.tqkv").stdout)["bits_per_value"]
            kl, top1 = compare(ref, continuation_logits(model, d / "x.ggsn", cont, llm=llm))
            res.setdefault(name, []).append((bits, kl, top1, te, td))
    del llm, llm_off
    return res, floors


def section(title, res, floors, labels):
    print(f"### {title}\n")
    print("rounding floor (flash attention off): KL " + " / ".join(f"{k:.4f}" for k, _ in floors) + ", top-1 " +
          " / ".join(f"{t:.1%}" for _, t in floors) + f" ({', '.join(labels)})\n")
    print("| levers | bits per K/V value | mean KL | top-1 | encode / decode s |")
    print("|---|---|---|---|---|")
    for name, rows in res.items():
        print(f"| {name} | " + " / ".join(f"{r[0]:.2f}" for r in rows) + " | " +
              " / ".join(f"{r[1]:.4f}" for r in rows) + " | " + " / ".join(f"{r[2]:.1%}" for r in rows) + " | " +
              f"{np.median([r[3] for r in rows]):.3f} / {np.median([r[4] for r in rows]):.3f} |")
    print()
    sys.stdout.flush()


def main():
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        if "gemma" in ONLY:
            g = gemma()
            ps = text_tokens(g, 1128 + 1)
            section("Gemma 3 270M (head size 256, iSWA, QK-norm), 1000 + 128 tokens", *measure(d, g, ps, 1000),
                    [n for n, _ in ps])
        if "stories" in ONLY and STORIES.exists():
            ps = text_tokens(STORIES, 380 + 128 + 1)
            section("stories260K (head size 8), 380 + 128 tokens", *measure(d, STORIES, ps, 380), [n for n, _ in ps])
        if "hd128" in ONLY and STORIES.exists():
            m = d / "gen128.gguf"
            vocab, _ = make_model(m, STORIES, 128, k_outliers=4)
            rng = np.random.default_rng(128)
            ps = [(f"random {i}", [1] + rng.integers(3, vocab, 1128).tolist()) for i in range(2)]
            section("generated llama, head size 128, GQA 4, outlier K channels, 1000 + 128 random tokens",
                    *measure(d, m, ps, 1000), [n for n, _ in ps])


main()
