"""long_sessions.py [--tokens N] - Gemma 3 270M sessions of N tokens (default
24576; the model's window is 32K) on two texts of this project's own, saved
once under ~/.cache/tq/long (TQ_CACHE's parent: see tests/oracle/_env.py) for
issue 22's long-context benchmarks, with the next 128 tokens of each text for
teacher forcing.  The texts: `docs` (README, formats/ and lib/ specs, man
pages) and `code` (the C sources of lib/, formats/ and cmd/), read from the
git history at TEXT_REV, so anyone with a clone rebuilds the same sessions
whatever the checkout holds now (read from the checkout, they changed with
every edit of a README line).  Prefill with flash
attention on, as llama.cpp's server saves; about 5 minutes a session on 2
cores.  Prints each session's path, tokens, size and prefill time."""
import argparse
import fnmatch
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oracle"))
from _env import CACHE, ROOT, gemma, need  # noqa: E402

np, llama_cpp = need("numpy", "llama_cpp")

TEXTS = {
    "docs": ["README.md", "formats/*.md", "formats/*/*.md", "lib/*.md", "man/*.1"],
    "code": ["lib/*.c", "formats/*.c", "formats/*/*.c", "cmd/*.c"],
}
CONT = 128
TEXT_REV = "2fa285ba85b4ea856bf8ec15d4361fe84855e31b"


def session_path(name, tokens=24576):
    """Where session `name` of `tokens` tokens is cached (its continuation: .cont.npy beside)."""
    return CACHE.parent / "long" / f"gemma3-270m-{name}-{tokens}.ggsn"


def git(*args):
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=True).stdout


def text_of(name):
    """The text's files as they were at TEXT_REV (a glob's * stays inside one folder)."""
    tree = git("ls-tree", "-r", "--name-only", TEXT_REV).decode().splitlines()
    files = sorted(f for pat in TEXTS[name] for f in tree
                   if fnmatch.fnmatch(f, pat) and f.count("/") == pat.count("/"))
    return "\n\n".join(git("show", f"{TEXT_REV}:{f}").decode() for f in files)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=24576)
    args = ap.parse_args()
    model = gemma()
    out = CACHE.parent / "long"
    out.mkdir(parents=True, exist_ok=True)
    n_ctx = 32768
    llm = llama_cpp.Llama(model_path=str(model), n_ctx=n_ctx, n_batch=512, logits_all=False,
                          verbose=False, flash_attn=True)
    for name in TEXTS:
        state = session_path(name, args.tokens)
        cont = state.with_suffix(".cont.npy")
        toks = llm.tokenize(text_of(name).encode(), add_bos=True)
        if len(toks) < args.tokens + CONT:
            raise SystemExit(f"{name}: {len(toks)} tokens, fewer than {args.tokens} + {CONT}")
        if not (state.exists() and cont.exists()):
            t0 = time.time()
            llm.reset()
            llm.eval(toks[: args.tokens])
            arr = (llama_cpp.llama_token * args.tokens)(*toks[: args.tokens])
            tmp = state.with_suffix(".tmp")
            assert llama_cpp.llama_state_save_file(llm._ctx.ctx, str(tmp).encode(), arr, args.tokens)
            tmp.rename(state)
            np.save(cont, np.array(toks[args.tokens : args.tokens + CONT], dtype=np.int32))
            print(f"{name}: prefilled {args.tokens} tokens in {time.time() - t0:.0f} s")
        print(f"{state}: {args.tokens} tokens of {len(toks)}, {state.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
