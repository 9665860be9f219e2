"""Long context guard on the shape most deployed models have (issue 29): SmolLM2-135M-Instruct
(llama: 30 layers, 3 KV heads of 64, dense GQA, no sliding window, so no cells a resumed
session never reads again), a session of the first 4096 tokens of a held-out text of the
text set (tests/oracle/_texts.py: TEXT, never chosen on), saved once under the model cache
(about 25 s of prefill on 2 cores), encoded with the default preset and the small
one, decoded, restored in llama.cpp, its last cell re-fed with the next 256 tokens in one
batch.  KL against the uncompressed restore, beside the floor (that restore fed one token a
call: another summation order).  A guard, not the acceptance run (that is
tests/bench/kv_texts.py --model=smollm2 at 7168 tokens on every held-out text): every K tensor transform-coded (auto
finds it pays at this length), V's first cell kept (the attention sink's V is far shorter than
the others, and an error there reaches every step), the small preset's V transform-coded at
unit norm (where its blocks cost more: 19 of 30 on the C++ text, whose V rows repeat), and the
presets within their bounds (measured on the C++ text: balanced 2.918 bits at 0.93x the floor,
small 2.146 at 1.64x).
Exit 77 = oracle missing."""
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from _env import need, smollm2  # noqa: E402

need("numpy", "llama_cpp")
from _guard import guard_session, plan_rows, restored  # noqa: E402
from long_sessions import MODELS  # noqa: E402

TEXT, TOKENS, STEPS = "cpp", 4096, 256  # the held-out text the default restored worst
# preset: (most bits per K/V value, most KL / floor)
LIMITS = {"balanced": (3.1, 2.0), "small": (2.3, 4.5)}


def main():
    m = smollm2()
    llm, state, cont, ref, floor = guard_session(m, "smollm2-135m-guard", TEXT, TOKENS, STEPS)
    values = MODELS["smollm2"]["kv_values"] * TOKENS
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        for preset, (max_bits, max_x) in LIMITS.items():
            bits, kl, top1 = restored(llm, state, cont, ref, m, d, values, "--preset", preset)
            print(f"{preset:8s} {bits:.3f} bits  KL {kl:.5f} ({kl / floor:.2f}x floor)  top-1 {top1:.1%}")
            plan, rows = plan_rows(state, m, preset)
            k_rows = [ln for ln in rows if " K " in ln]
            v_rows = [ln for ln in rows if " V " in ln]
            assert len(k_rows) == 30 and all("klt(" in ln for ln in k_rows), "K not transform-coded:\n" + plan
            assert len(v_rows) == 30 and all("+sink" in ln for ln in v_rows), "V's first cell not kept:\n" + plan
            if preset == "small":  # V transform-coded at unit norm, but where its blocks cost less
                gains = sum("klt(" in ln and "+gains" in ln for ln in v_rows)
                assert gains >= 15, f"small: {gains} of 30 V tensors transform-coded with gains:\n" + plan
            assert bits <= max_bits, f"{preset}: {bits:.3f} bits, more than {max_bits}"
            assert kl <= max_x * floor, f"{preset}: KL {kl:.5f}, {kl / floor:.2f}x the floor {floor:.5f}"


if __name__ == "__main__":
    main()
print("ok smollm2_long_session_restores_within_the_guard")  # the behaviour, for tests/run.sh (reached only when every check passed)
