"""long_sessions.py [--model gemma|smollm2] [--tokens N] [--texts all|choose|judge|NAME,...] - long
sessions of the two real models on the text set of tests/oracle/_texts.py (eight texts of eight
kinds from what PyPI packages ship, split once into four to choose on and four held out), saved
once under ~/.cache/tq/long (TQ_CACHE's parent: see tests/oracle/_env.py) for the long-context
benchmarks, with the next 512 tokens of each text for teacher forcing:
  gemma    Gemma 3 270M, 24576 tokens (its window is 32K; iSWA, heads of 256); --tokens 1536
           for the short set
  smollm2  SmolLM2-135M-Instruct, 7168 tokens (its window is 8192; dense GQA, 3 KV heads of
           64, no sliding window: the shape most deployed models have)
`docs` and `code`, two texts of this project's own read from the git history at TEXT_REV, are
kept for the lab notes measured on them (tests/bench/results); no default is chosen or judged on
them now (issue 36).  Prefill with flash attention on, as llama.cpp's server saves; about 5
minutes a Gemma session and 1 a SmolLM2 one on 2 cores.  Prints each session's path, tokens,
size and prefill time."""
import argparse
import fnmatch
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oracle"))
from _env import CACHE, ROOT, gemma, need, smollm2  # noqa: E402

np, llama_cpp = need("numpy", "llama_cpp")
from _llama_util import cached_session  # noqa: E402
import _texts  # noqa: E402

TEXTS = {
    "docs": ["README.md", "formats/*.md", "formats/*/*.md", "lib/*.md", "man/*.1"],
    "code": ["lib/*.c", "formats/*.c", "formats/*/*.c", "cmd/*.c"],
}
CONT = 512  # the continuation kept: benches force 128 steps or more of it
TEXT_REV = "2fa285ba85b4ea856bf8ec15d4361fe84855e31b"


# per model: its loader, the context it is run with, the session's default length, K/V
# values a cell (layers x 2 x KV width) and the name its sessions are cached under
MODELS = {
    "gemma": dict(path=gemma, n_ctx=32768, tokens=24576, kv_values=18 * 2 * 256, tag="gemma3-270m"),
    "smollm2": dict(path=smollm2, n_ctx=8192, tokens=7168, kv_values=30 * 2 * 192, tag="smollm2-135m"),
}


def session_path(name, tokens=None, model="gemma"):
    """Where session `name` of `tokens` tokens (the model's default) is cached (its
    continuation: .cont.npy beside)."""
    m = MODELS[model]
    return CACHE.parent / "long" / f"{m['tag']}-{name}-{tokens or m['tokens']}.ggsn"


def split_options(own):
    """The script's own `--name=value` options (the names in `own`, each with its "="), and the
    other arguments: the switches it passes on to tq."""
    args = sys.argv[1:]
    return dict(a.split("=", 1) for a in args if a.startswith(own)), [a for a in args if not a.startswith(own)]


def open_session(model_path, name, steps, model="gemma", n_batch=512):
    """A llama.cpp context of `model` at its sessions' length, session `name`'s path and the
    session's next `steps` tokens (for teacher forcing)."""
    llm = llama_cpp.Llama(model_path=str(model_path), n_ctx=MODELS[model]["n_ctx"], n_batch=n_batch,
                          logits_all=False, verbose=False, flash_attn=True)
    state = session_path(name, model=model)
    return llm, state, np.load(state.with_suffix(".cont.npy")).tolist()[:steps]


def table_head(*columns):
    """A Markdown table's header and rule."""
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))


def git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=True).stdout


def text_of(name):
    """The text's files as they were at TEXT_REV (a glob's * stays inside one folder)."""
    tree = git("ls-tree", "-r", "--name-only", TEXT_REV).decode().splitlines()
    files = sorted(f for pat in TEXTS[name] for f in tree
                   if fnmatch.fnmatch(f, pat) and f.count("/") == pat.count("/"))
    return "\n\n".join(git("show", f"{TEXT_REV}:{f}").decode() for f in files)


def text_names(spec):
    """The texts a --texts/--sessions value names: all, choose, judge or NAME,..."""
    if spec in ("all", "choose", "judge"):
        return _texts.names(spec)
    return spec.split(",")


def text_tokens(llm, name):
    """A text's tokens as the model reads it (BOS first)."""
    if name in TEXTS:
        return llm.tokenize(text_of(name).encode(), add_bos=True)
    return _texts.tokens(llm, name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=sorted(MODELS), default="gemma")
    ap.add_argument("--tokens", type=int)
    ap.add_argument("--texts", default="all")
    args = ap.parse_args()
    m = MODELS[args.model]
    tokens = args.tokens or m["tokens"]
    model = m["path"]()
    out = CACHE.parent / "long"
    out.mkdir(parents=True, exist_ok=True)
    llm = llama_cpp.Llama(model_path=str(model), n_ctx=m["n_ctx"], n_batch=512, logits_all=False,
                          verbose=False, flash_attn=True)
    for name in text_names(args.texts):
        state = session_path(name, tokens, args.model)
        toks = text_tokens(llm, name)
        t0 = time.time()
        fresh = not state.exists()
        cached_session(llm, toks, tokens, CONT, state)
        if fresh:
            print(f"{name}: prefilled {tokens} tokens in {time.time() - t0:.0f} s")
        print(f"{state}: {tokens} tokens of {len(toks)}, {state.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
