"""kv_ring.py [--prompt=readme] - a state as llama-server saves it by default (a benchmark, not a
test): Gemma 3 270M with the sliding layers' cache kept as a ring of about window + batch cells
(llama-cpp-python swa_full=False, the server without --swa-full), 1200 tokens of one of the oracle
prompts, saved, encoded with --model at each preset, decoded, restored and fed the next 128
tokens (teacher forcing).  Bits per K/V value and KL against the uncompressed restore, and the
plan's first sliding-layer line: whether its cells past the window were found.
TQ_ORACLES/bin/python3 tests/bench/kv_ring.py"""
import ctypes
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import TQ, gemma  # noqa: E402
from _llama_util import compare  # noqa: E402
import llama_cpp  # noqa: E402

OPTS = dict(a.split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
PROMPT = HERE.parent / "oracle" / "prompts" / (OPTS.get("--prompt", "readme") + ".txt")
N_PROMPT, N_CONT = 1200, 128


def main():
    g = gemma()
    llm = llama_cpp.Llama(model_path=str(g), n_ctx=1400, n_batch=512, logits_all=True, verbose=False,
                          flash_attn=True, swa_full=False)
    toks = llm.tokenize(PROMPT.read_bytes(), add_bos=True)
    prompt, cont = toks[:N_PROMPT], toks[N_PROMPT : N_PROMPT + N_CONT]

    def run(path):
        llm.reset()
        got = (llama_cpp.llama_token * 2048)()
        n = ctypes.c_size_t(0)
        assert llama_cpp.llama_state_load_file(llm._ctx.ctx, str(path).encode(), got, 2048, ctypes.byref(n))
        n = n.value
        llm.n_tokens = n
        llm.input_ids[:n] = list(got[:n])
        llm.eval(list(cont))
        return np.array(llm.scores[n : n + len(cont)], dtype=np.float64)

    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        llm.eval(prompt)
        arr = (llama_cpp.llama_token * N_PROMPT)(*prompt)
        assert llama_cpp.llama_state_save_file(llm._ctx.ctx, str(d / "s.ggsn").encode(), arr, N_PROMPT)
        ref = run(d / "s.ggsn")
        plan = subprocess.run([TQ, "encode-kvdump", d / "s.ggsn", "--model", g, "--dry-run"], capture_output=True,
                              text=True, check=True).stdout
        print(next(ln for ln in plan.splitlines() if ln.startswith("  state 1 ")).strip())
        values = json.loads(subprocess.run([TQ, "inspect", "--json", d / "s.ggsn"], capture_output=True,
                                           text=True, check=True).stdout)["kv_values"]
        for preset in ("balanced", "small"):
            subprocess.run([TQ, "encode-kvdump", d / "s.ggsn", "--model", g, "-q", "-o", d / "x.tqkv",
                            "--preset", preset], check=True)
            subprocess.run([TQ, "decode-kvdump", d / "x.tqkv", "-q", "-o", d / "x.ggsn"], check=True)
            kl, top1 = compare(ref, run(d / "x.ggsn"))
            bits = 8 * (d / "x.tqkv").stat().st_size / values
            print(f"{PROMPT.stem} {preset}: {bits:.3f} bits, KL {kl:.5f}, top-1 {top1:.1%}", flush=True)


if __name__ == "__main__":
    main()
