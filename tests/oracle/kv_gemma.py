"""Gemma 3 270M (head size 256, one KV head, iSWA, QK-norm) snapshots in
llama.cpp: for two prompts of our own (tests/oracle/prompts: 1200 tokens of
tq's README and of its format notes, so the 512-token sliding window is
passed), the session file after the prompt is encoded with every preset,
decoded, restored, and fed the next 128 tokens of the text (teacher
forcing); next-token distributions are compared with the uncompressed
restore: bits per K/V value, mean KL(reference || test), top-1 agreement,
beside the rounding floor (prompt and continuation run again with flash
attention off: two uncompressed runs that differ only in summation order).  Also: encode
without --model takes the rotation group from the state's architecture
(gemma3: 256) and says so.  Exit 77 = oracle missing."""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import TQ, gemma, need  # noqa: E402

np, llama_cpp = need("numpy", "llama_cpp")
from _llama_util import compare  # noqa: E402

MODEL = gemma()
N_PROMPT, N_CONT, N_CTX = 1200, 128, 1400
PROMPTS = sorted((Path(__file__).resolve().parent / "prompts").glob("*.txt"))


def llm(flash=True):
    return llama_cpp.Llama(model_path=str(MODEL), n_ctx=N_CTX, n_batch=512, logits_all=True, verbose=False,
                           flash_attn=flash)


def save_state(m, prompt, path):
    m.reset()
    m.eval(prompt)
    arr = (llama_cpp.llama_token * len(prompt))(*prompt)
    assert llama_cpp.llama_state_save_file(m._ctx.ctx, str(path).encode(), arr, len(prompt))


def continuation(m, state, prompt, cont):
    """Restore, drop the last cell, re-feed its token, then the continuation."""
    import ctypes
    m.reset()
    toks = (llama_cpp.llama_token * N_CTX)()
    n = ctypes.c_size_t(0)
    assert llama_cpp.llama_state_load_file(m._ctx.ctx, str(state).encode(), toks, N_CTX, ctypes.byref(n))
    n = n.value
    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(m._ctx.ctx), 0, n - 1, -1)
    m.n_tokens = n - 1
    m.input_ids[: n - 1] = list(toks[: n - 1])
    m.eval([toks[n - 1]] + cont[:-1])
    return np.array(m.scores[n - 1 : n - 1 + len(cont)], dtype=np.float64)


def tq(*args):
    p = subprocess.run([TQ, *map(str, args)], capture_output=True, text=True)
    assert p.returncode == 0, (args, p.stderr)
    return p


fa_on, fa_off = llm(True), llm(False)
vocab = fa_on
results = []
with tempfile.TemporaryDirectory() as d:
    d = Path(d)
    for prompt_file in PROMPTS:
        toks = vocab.tokenize(prompt_file.read_bytes(), add_bos=True)
        assert len(toks) >= N_PROMPT + N_CONT, (prompt_file, len(toks))
        prompt, cont = toks[:N_PROMPT], toks[N_PROMPT : N_PROMPT + N_CONT]
        state = d / "s.ggsn"
        save_state(fa_on, prompt, state)
        ref = continuation(fa_on, state, prompt, cont)
        save_state(fa_off, prompt, d / "off.ggsn")  # prompt and continuation with flash attention off
        floor = compare(ref, continuation(fa_off, d / "off.ggsn", prompt, cont))
        values = json.loads(tq("inspect", "--json", state).stdout)["kv_values"]
        print(f"{prompt_file.name}: {N_PROMPT} prompt + {N_CONT} teacher-forced tokens; rounding floor (flash "
              f"attention off) mean KL {floor[0]:.5f}, top-1 {floor[1]:.1%}")
        rows = {}
        for preset, extra in [("lossless", ["--model", MODEL]), ("q8", ["--model", MODEL]),
                              ("balanced", ["--model", MODEL]), ("small", ["--model", MODEL]), ("balanced", []),
                              ("balanced", ["--head-dim", 128])]:
            label = preset + (" (no --model)" if not extra else " (group 128)" if extra[0] == "--head-dim" else "")
            snap, back = d / "x.tqkv", d / "x.ggsn"
            enc = tq("encode-kvdump", state, "-o", snap, "--preset", preset, *extra)
            plan = json.loads(tq("encode-kvdump", state, "--dry-run", "--json", "--preset", preset, *extra).stdout)
            tq("decode-kvdump", snap, "-o", back, "-q")
            kl, top1 = compare(ref, continuation(fa_on, back, prompt, cont))
            bpv = snap.stat().st_size * 8 / values
            rows[label] = (bpv, kl, top1)
            print(f"  {label:22s} {bpv:6.3f} bits/value  mean KL {kl:.5f}  top-1 {top1:.1%}  group {plan['group']}")
            if preset == "lossless":
                assert back.read_bytes() == state.read_bytes() and kl == 0.0, "lossless changed the restore"
            else:
                assert plan["group"] == (128 if "128" in label else 256), plan["group"]
            if not extra:
                assert "head size of every gemma3 model" in enc.stderr, enc.stderr
        assert rows["q8"][1] <= rows["balanced"][1] <= rows["small"][1], rows
        # q8 is within the rounding floor's reach; the head size is the right group (the 128 that the row
        # width alone suggests costs quality); the default preset keeps the model usable
        assert rows["q8"][1] < 2 * floor[0] + 0.005, (rows, floor)
        assert rows["balanced"][1] < rows["balanced (group 128)"][1], rows
        assert rows["balanced"][1] < 0.15 and rows["balanced"][2] >= 0.7, rows
        results.append((prompt_file.name, floor, rows))
