"""Long context guard (issue 22): a Gemma 3 270M session of the first 8192 tokens of a
held-out text of the text set (tests/oracle/_texts.py: TEXT, never chosen on), saved once
under the model cache (about 40 s of prefill on 2 cores), encoded with the default preset and the small
one, decoded, restored in llama.cpp, its last cell re-fed with the next 128
tokens in one batch.  KL against the uncompressed restore, beside the floor
(that restore fed one token a call: another summation order).  A guard, not
the acceptance run (that is tests/bench/kv_texts.py at 24,576 tokens on every held-out text): the sliding
layers' cells past their window (15/18 of the tensors, 94% of their cells) must be coded
coarser, every global layer's K transform-coded (and without InnerQ scales; the sliding layers' K
with them), and each preset must take at least 0.5 bits
a value fewer than with every cell alike (--past-bits 0), the default within 1.5x the floor
and small within 2.5x, at <= 2.8 and <= 2.0 bits per K/V value (measured here on the tz tables: balanced 2.462
bits at 1.10x, small 1.582 at 1.22x, against 3.135 at 1.42x and 2.375 at 1.90x with every cell
alike).  Exit 77 = oracle missing."""
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from _env import gemma, need  # noqa: E402

need("numpy", "llama_cpp")
from _guard import guard_session, plan_rows, restored  # noqa: E402

TEXT, TOKENS, STEPS = "tables", 8192, 128  # the held-out text the default restored worst


def main():
    g = gemma()
    llm, state, cont, ref, floor = guard_session(g, "gemma3-270m-guard", TEXT, TOKENS, STEPS)
    values = 18 * 2 * 256 * TOKENS
    limits = {"balanced": (2.8, 1.5), "small": (2.0, 2.5)}
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        for preset, (max_bits, max_x) in limits.items():
            bits_of = {}
            for sw in (["--past-bits", "0"], []):
                bits, kl, top1 = restored(llm, state, cont, ref, g, d, values, "--preset", preset, *sw)
                print(f"{preset:8s} {' '.join(sw) or 'default':15s} {bits:.3f} bits  KL {kl:.5f} "
                      f"({kl / floor:.2f}x floor)  top-1 {top1:.1%}")
                bits_of[bool(sw)] = bits
                if sw:
                    continue
                assert bits < bits_of[True] - 0.5, f"{preset}: {bits} bits, every cell alike {bits_of[True]}"
                plan, rows = plan_rows(state, g, preset)
                sliding = [ln for ln in rows if ln.startswith("  state 1 ")]
                sliding_k = [ln for ln in sliding if " K " in ln]
                global_k = [ln for ln in rows if ln.startswith("  state 0 ") and " K " in ln]
                assert len(sliding) == 30 and all("past(<" in ln for ln in sliding), "past cells:\n" + plan
                assert len(global_k) == 3 and all("klt(" in ln for ln in global_k), "global K:\n" + plan
                # automatic InnerQ: the scales where K keeps tq's blocks, none on the transform
                assert all("+innerq" in ln for ln in sliding_k), "sliding K without scales:\n" + plan
                assert not any("innerq" in ln for ln in global_k), "transform-coded K with scales:\n" + plan
                assert bits <= max_bits and kl <= max_x * floor, (preset, bits, kl, floor)

if __name__ == "__main__":
    main()
print("ok gemma_long_session_restores_within_the_guard")  # the behaviour, for tests/run.sh (reached only when every check passed)
