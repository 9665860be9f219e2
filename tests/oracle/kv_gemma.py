"""Gemma 3 270M (head size 256, one KV head, iSWA, QK-norm) snapshots in
llama.cpp: for two held-out texts of the text set (make test the first; make test-full,
TQ_TEST_FULL=1, both; tests/oracle/_texts.py: the licences and the C++ source, 1536 tokens
each, so the 512-token sliding window is passed), the session file after the prompt is
encoded with every preset,
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
from _env import FULL, TQ, gemma, need  # noqa: E402

np, llama_cpp = need("numpy", "llama_cpp")
from _llama_util import compare, continuation_logits, open_llm, save_state  # noqa: E402
import _texts  # noqa: E402

MODEL = gemma()
N_PROMPT, N_CONT, N_CTX = 1536, 128, 1700
TEXTS = ["legal", "cpp"]  # held out: never chosen on
assert all(_texts.split(t) == "judge" for t in TEXTS), TEXTS


def tq(*args):
    p = subprocess.run([TQ, *map(str, args)], capture_output=True, text=True)
    assert p.returncode == 0, (args, p.stderr)
    return p


fa_on, fa_off = open_llm(MODEL, N_CTX, flash=True), open_llm(MODEL, N_CTX, flash=False)
vocab = fa_on
results = []
with tempfile.TemporaryDirectory() as d:
    d = Path(d)
    for text in TEXTS if FULL else TEXTS[:1]:
        toks = _texts.tokens(vocab, text)
        assert len(toks) >= N_PROMPT + N_CONT, (text, len(toks))
        prompt, cont = toks[:N_PROMPT], toks[N_PROMPT : N_PROMPT + N_CONT]
        state = d / "s.ggsn"
        save_state(MODEL, prompt, state, llm=fa_on)
        ref = continuation_logits(MODEL, state, cont[:-1], llm=fa_on)
        save_state(MODEL, prompt, d / "off.ggsn", llm=fa_off)  # prompt and continuation with flash attention off
        floor = compare(ref, continuation_logits(MODEL, d / "off.ggsn", cont[:-1], llm=fa_off))
        values = json.loads(tq("inspect", "--json", state).stdout)["kv_values"]
        print(f"{text}: {N_PROMPT} prompt + {N_CONT} teacher-forced tokens; rounding floor (flash "
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
            kl, top1 = compare(ref, continuation_logits(MODEL, back, cont[:-1], llm=fa_on))
            bpv = snap.stat().st_size * 8 / values
            rows[label] = (bpv, kl, top1)
            print(f"  {label:22s} {bpv:6.3f} bits/value  mean KL {kl:.5f}  top-1 {top1:.1%}  group {plan['group']}")
            if preset == "lossless":
                assert back.read_bytes() == state.read_bytes() and kl == 0.0, "lossless changed the restore"
            else:
                assert plan["group"] == (128 if "128" in label else 256), plan["group"]
            if not extra:
                assert "head size of every gemma3 model" in enc.stderr, enc.stderr
        # q8 no worse than balanced beyond half the floor (both within reach of it on the C++ text:
        # 0.00141 against 0.00125), balanced no worse than small
        assert rows["q8"][1] <= rows["balanced"][1] + 0.5 * floor[0], (rows, floor)
        assert rows["balanced"][1] <= rows["small"][1], rows
        # q8 is within the rounding floor's reach; the head size is the right group (the 128 that the row
        # width alone suggests costs quality); the default preset keeps the model usable
        assert rows["q8"][1] < 2 * floor[0] + 0.005, (rows, floor)
        assert rows["balanced"][1] < rows["balanced (group 128)"][1], rows
        assert rows["balanced"][1] < 0.15 and rows["balanced"][2] >= 0.7, rows
        # issue 29's and 36's bar at short context: the default within 1.5x the floor at <= 3.3 bits (cells
        # past the sliding window coarser, the rest one bit finer than the preset's 4 / 3 bits:
        # measured 3.21 bits at 1.27-1.30x)
        assert rows["balanced"][0] <= 3.3 and rows["balanced"][1] <= 1.5 * floor[0], (rows, floor)
        results.append((text, floor, rows))
print("ok gemma_short_windows_restore_within_the_bars")  # the behaviour, for tests/run.sh (reached only when every check passed)
