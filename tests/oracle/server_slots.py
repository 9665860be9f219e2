"""llama-server's slot workflow through tq (issue 23), against the real
server (tests/setup_server.sh builds it from the pinned llama-cpp-python's
source): a 2048-token prompt of our own text prefilled into slot 0 of Gemma
3 270M, the slot saved (POST /slots/0?action=save), the file encoded with
`tq encode-kvdump --model` and decoded back into the slot directory, the slot
erased and restored from it, then 48 greedy tokens with their top-20
log-probabilities.  Compared with the same server restored from the raw
file: the lossless preset continues identically (tokens and
probabilities), the default preset continues from the restored cells (not
a re-processed prompt) with text close to the raw one's (mean KL over the
top-20, teacher-forced along the raw continuation's tokens).  Three Gemma servers:
--swa-full, the default ring of sliding-window cells (make test-full only), and a q8_0 cache;
and one of SmolLM2-135M (llama, dense GQA, no sliding window: no --swa-full to think of).
Then the refusals: a snapshot decoded for another model, a truncated
snapshot; and a slot saved at one context size restored into a server with
a larger one (allowed) and a smaller one (refused by the server, as the
raw file is).  Every server is stopped at the end, also on failure."""
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FULL, ROOT, TQ, gemma, need, smollm2, tq  # noqa: E402

need("numpy", "gguf")
from _models import make_model  # noqa: E402
from _server import Server, agreement, kl_along, left_behind, server_binary  # noqa: E402

PROMPT = 2048
STEPS = 48
TEXT = "\n\n".join(p.read_text() for p in sorted((ROOT / "tests" / "oracle" / "prompts").glob("*.txt")))
# name, server flags, whether the server continues from a restored slot's cells: without
# --swa-full it re-processes the whole prompt after any restore of an iSWA model's slot (its
# check wants one cell more than the window it keeps), so save/restore buys nothing there
CONFIGS = [("swa-full", ["--swa-full"], True), ("ring", [], False),
           ("q8_0", ["--swa-full", "-ctk", "q8_0", "-ctv", "q8_0"], True)]
# the ring's round trip only in make test-full: each of its restores has the server process the
# prompt again, and make test restores onto the ring through tq slot (slot_windows.py, both
# presets; slot_links.py)
if not FULL:
    CONFIGS = [c for c in CONFIGS if c[0] != "ring"]


def ok(behaviour):
    """One behaviour passed (tests/run.sh reports each as oracle/server_slots/NAME)."""
    print(f"ok {behaviour}", flush=True)


def round_trip(slot_file, out, model, *switches):
    """The snapshot and what the encode said."""
    snap = out.with_suffix(".tqkv")
    said = tq("encode-kvdump", slot_file, "-o", snap, "--model", model, *switches).stderr
    tq("decode-kvdump", snap, "-o", out, "--model", model, "-q")
    return snap, said


def restored(s, name, prompt, uses_restore):
    """Slot 0 erased, restored from name, continued; checks whether the server
    took the prompt from the restored cells (all but the last token) or
    processed it again."""
    got = s.resume(name, prompt, STEPS)
    assert got["restored"] == len(prompt), f"{name}: restored {got['restored']} tokens, prompt has {len(prompt)}"
    want = 1 if uses_restore else len(prompt)
    assert got["processed"] == want, \
        f"{name}: the server processed {got['processed']} prompt tokens after the restore, expected {want}"
    assert len(got["steps"]) == STEPS, f"{name}: {len(got['steps'])} steps, expected {STEPS}"
    return got


def workflow(binary, model, work, name, flags, uses_restore, qk_norm=True):
    slots = work / name
    slots.mkdir()
    with Server(binary, model, slots, *flags) as s:
        prompt = s.tokenize(TEXT)[:PROMPT]
        assert len(prompt) == PROMPT, f"the prompt text has {len(prompt)} tokens, fewer than {PROMPT}"
        s.complete(prompt, 1)
        saved = s.slot("save", "raw.bin")
        assert saved["n_saved"] >= PROMPT - 1, f"saved {saved['n_saved']} tokens"
        raw = restored(s, "raw.bin", prompt, uses_restore)
        round_trip(slots / "raw.bin", slots / "lossless.bin", model, "--preset", "lossless")
        same = restored(s, "lossless.bin", prompt, uses_restore)
        assert same["steps"] == raw["steps"], \
            f"{name}: lossless round trip continues otherwise: {agreement(raw['steps'], same['steps'])}"
        ok(f"lossless_round_trip_continues_identically_{name}")
        snap, said = round_trip(slots / "raw.bin", slots / "default.bin", model)
        # a quantized cache holds K and V Hadamard-rotated: coded turned back, with the Q-aware
        # scales of the model's channels
        quantized = "-ctk" in flags
        assert ("36 K/V tensors stored Hadamard-rotated" in said) == quantized, f"{name}: {said}"
        assert ("InnerQ: Q-aware scales" in said) == qk_norm, f"{name}: {said}"  # QK-norm gains
        lossy = restored(s, "default.bin", prompt, uses_restore)
        n = agreement(raw["steps"], lossy["steps"])[0]
        kl = 0.0
        if uses_restore:  # teacher-forced along the raw slot's tokens, from the restored cells
            kl = kl_along(s, prompt, raw["steps"], restore="default.bin")
        size = (slots / "raw.bin").stat().st_size
        print(f"{name}: slot {size / 1e6:.1f} MB, snapshot {snap.stat().st_size / 1e6:.2f} MB "
              f"({size / snap.stat().st_size:.2f}x); default preset: {n} of {STEPS} tokens before "
              f"the first divergence, KL over the top-20 {kl:.4f} teacher-forced; lossless identical"
              f"{'' if uses_restore else ' (the server processed the prompt again after each restore)'}")
        # garbage restored (wrong cells, wrong layout) gives KL of nats, not of thousandths
        assert kl < 0.5, f"{name}: the default preset's restore does not continue the text"
        assert lossy["content"].strip(), f"{name}: the default preset's continuation is empty"
        if uses_restore:
            ok(f"default_preset_restores_and_continues_{name}")
        else:
            ok(f"server_processes_the_prompt_again_after_any_restore_{name}")
        return prompt, slots, raw["steps"]


def refusals(work, model, slots):
    snap = slots / "default.tqkv"
    other = work / "other.gguf"
    make_model(other, None, head_dim=64)
    p = tq("decode-kvdump", snap, "-o", work / "x.bin", "--model", other, ok=False)
    assert p.returncode and len(p.stderr.strip().splitlines()) == 1 and "another model" in p.stderr, \
        f"decode for another model: exit {p.returncode}: {p.stderr!r}"
    data = snap.read_bytes()
    (work / "cut.tqkv").write_bytes(data[: len(data) * 2 // 3])
    p = tq("decode-kvdump", work / "cut.tqkv", "-o", work / "y.bin", "--model", model, ok=False)
    assert p.returncode and len(p.stderr.strip().splitlines()) == 1, \
        f"truncated snapshot: exit {p.returncode}: {p.stderr!r}"
    for f in ("x.bin", "y.bin"):
        assert not (work / f).exists(), f"a refused decode left {f}"
    ok("foreign_and_truncated_snapshots_are_refused_with_one_line")


def other_context_sizes(binary, model, slots, prompt):
    """The swa-full slot (saved at 4096 cells) into 8192 cells: restored and
    continued as the raw file is; into 1024 cells: refused for both."""
    with Server(binary, model, slots, "--swa-full", ctx=8192) as s:
        raw = restored(s, "raw.bin", prompt, True)
        same = restored(s, "lossless.bin", prompt, True)
        assert same["steps"] == raw["steps"], "lossless round trip restored into 8192 cells differs"
    with Server(binary, model, slots, "--swa-full", ctx=1024) as s:
        for f in ("raw.bin", "default.bin"):
            r = s.slot("restore", f, ok=False)
            assert "http_status" in r, f"{f}: a 2048-token slot restored into 1024 cells: {r}"
    ok("slots_restore_into_a_larger_context_and_are_refused_by_a_smaller_one")


def quantized_converts_to_f16(binary, model, slots, prompt, q8_steps):
    """The q8_0 slot's lossless snapshot decoded as an f16 cache (turned back into the model's
    channels: llama.cpp rotates only quantized caches) and restored into an f16 server: it
    continues as the q8_0 slot does, but for q8_0's rounding (rows left rotated would be
    another model's keys)."""
    snap = slots / "lossless.tqkv"
    tq("decode-kvdump", snap, "-o", slots / "f16.bin", "--cache-type", "f16", "--model", model, "-q")
    with Server(binary, model, slots, "--swa-full") as s:
        restored(s, "f16.bin", prompt, True)
        kl = kl_along(s, prompt, q8_steps, restore="f16.bin")
    print(f"q8_0 slot as an f16 cache: KL over the top-20 {kl:.4f} against the q8_0 slot")
    assert kl < 0.05, f"the q8_0 slot converted to f16 continues otherwise: KL {kl:.4f}"
    ok("a_quantized_slot_converts_to_an_f16_cache_in_the_models_channels")


def main():
    binary = server_binary()
    model = gemma()
    with tempfile.TemporaryDirectory() as td:
        work = Path(td)
        done = {}
        for name, flags, uses_restore in CONFIGS:
            done[name] = workflow(binary, model, work, name, flags, uses_restore)
        prompt, slots, _ = done["swa-full"]
        refusals(work, model, slots)
        other_context_sizes(binary, model, slots, prompt)
        quantized_converts_to_f16(binary, model, done["q8_0"][1], prompt, done["q8_0"][2])
        workflow(binary, smollm2(), work, "smollm2", [], True, qk_norm=False)
    leftover = left_behind()
    assert not leftover, f"servers left behind: {leftover}"
    ok("no_server_is_left_running")


if __name__ == "__main__":
    main()
