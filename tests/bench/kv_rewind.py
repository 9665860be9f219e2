"""kv_rewind.py [--rewind=64,512] [--session=docs] [SWITCHES ...] - what a snapshot's coarse
cells past the sliding window cost a session that is rewound before it goes on (a benchmark,
not a test): the long Gemma 3 270M session (tests/bench/long_sessions.py) is encoded with the
default preset and with SWITCHES (default `--past-bits 0`: every cell alike), decoded, restored
in llama.cpp, its last n cells removed (a user who edits the last n tokens, as llama-server does
when a prompt shares only a prefix with the cached one), and the n tokens and the next 128 fed
again in one batch.  KL over all those rows against the uncompressed restore rewound the same
way, beside the floor (that restore fed one token a call).  A query at the rewound position
reaches up to n cells that a plain resume never reads.
TQ_ORACLES/bin/python3 tests/bench/kv_rewind.py --rewind=64,512"""
import ctypes
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import TQ, gemma  # noqa: E402
from long_sessions import open_session, split_options  # noqa: E402
from _llama_util import compare  # noqa: E402
import llama_cpp  # noqa: E402

ARGV, sys.argv = sys.argv, sys.argv[:1]  # kv_long reads its own options when imported
import kv_long  # noqa: E402

sys.argv = ARGV
OPTS, SWITCHES = split_options(("--rewind=", "--session="))
REWIND = [int(n) for n in OPTS.get("--rewind", "64,512").split(",")]
SESSION = OPTS.get("--session", "docs")
SWITCHES = SWITCHES or ["--past-bits", "0"]


def rewound(llm, state, n, cont, one_by_one=False):
    """Restore, remove the last n cells, feed their tokens and cont; the logits of those rows."""
    ctx = llm._ctx.ctx
    mem = llama_cpp.llama_get_memory(ctx)
    llama_cpp.llama_memory_clear(mem, True)
    toks = (llama_cpp.llama_token * (kv_long.TOKENS + 8))()
    got = ctypes.c_size_t(0)
    assert llama_cpp.llama_state_load_file(ctx, str(state).encode(), toks, kv_long.TOKENS + 8,
                                           ctypes.byref(got)), f"restore of {state} failed"
    total = got.value
    llama_cpp.llama_memory_seq_rm(mem, 0, total - n, -1)
    return kv_long.batch_logits(llm, list(toks[total - n : total]) + cont, total - n, one_by_one)


def main():
    g = gemma()
    llm, state, cont = open_session(g, SESSION, kv_long.STEPS, n_batch=1024)
    print(f"| {SESSION}: rewound by | floor KL | default: bits, KL / floor | `{' '.join(SWITCHES)}`: bits, "
          "KL / floor |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        backs = {}
        for name, sw in (("default", []), ("switches", SWITCHES)):
            subprocess.run([TQ, "encode-kvdump", state, "-q", "-o", d / f"{name}.tqkv", "--model", g, *sw],
                           check=True)
            subprocess.run([TQ, "decode-kvdump", d / f"{name}.tqkv", "-q", "-o", d / f"{name}.ggsn"], check=True)
            bits = 8 * (d / f"{name}.tqkv").stat().st_size / (18 * 2 * 256 * kv_long.TOKENS)
            backs[name] = (d / f"{name}.ggsn", bits)
        for n in REWIND:
            ref = rewound(llm, state, n, cont)
            floor = compare(ref, rewound(llm, state, n, cont, one_by_one=True))[0]
            cells = []
            for name in ("default", "switches"):
                path, bits = backs[name]
                kl = compare(ref, rewound(llm, path, n, cont))[0]
                cells.append(f"{bits:.3f}, {kl / floor:.2f}")
            print(f"| {n} | {floor:.5f} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
