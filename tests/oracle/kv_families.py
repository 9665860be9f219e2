"""Every model family llama.cpp serves, through llama.cpp (issue 37): a tiny model of llama,
qwen2 and qwen3 (_models.py) and of each architecture in _tiny_models.RECIPES (hybrid, MLA, sinks, NoPE layers, per-layer head sizes,
chunked attention) saves a session file and a slot file after a 160-token prompt; each goes
through tq with and without --model:
  - the lossless preset decodes to the identical file;
  - the default preset decodes to a file llama.cpp restores and continues (32 teacher-forced
    steps), and with --model its mean KL against the uncompressed restore is no higher than
    without (beside the spread of the same KL over the continuation's four quarters, the
    noise of 32 steps on one state).
flash_attn is off, so llama.cpp stores V transposed, the layout llama-cpp-python's default
gives.  Exit 77 = oracle missing."""
import ctypes
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import TQ, need  # noqa: E402

np, gguf, llama_cpp = need("numpy", "gguf", "llama_cpp")
from _llama_util import log_softmax  # noqa: E402
import _models  # noqa: E402
import _tiny_models  # noqa: E402

ARCHS = ["llama", "qwen2", "qwen3", "mistral3", "smollm3", "qwen35", "qwen35moe", "qwen3next", "gpt-oss",
         "gemma4", "gemma4-shared", "gemma4-uneven", "gemma4-uneven2", "gemma4-uneven3", "llama4", "deepseek2", "granitehybrid", "lfm2", "mamba", "mamba2", "rwkv6",
         "rwkv7"]
# not claimed (arch.c column ok 0): lfm2moe, whose tiny model's identical random heads of 16 restore
# better coded two heads to a rotation (without --model) than one (its head size, with it)
PROMPT, CONT = 160, 32
GEMMA4_KL16 = {}  # the gemma4 variants' mean KL over 16 steps with --model, printed side by side


def llm_of(model):
    return llama_cpp.Llama(model_path=str(model), n_ctx=512, n_batch=256, n_threads=1, n_threads_batch=1,
                           logits_all=True, verbose=False, flash_attn=False)


def save(llm, prompt, session, slot):
    llm.reset()
    llm.eval(prompt)
    arr = (llama_cpp.llama_token * len(prompt))(*prompt)
    assert llama_cpp.llama_state_save_file(llm._ctx.ctx, str(session).encode(), arr, len(prompt))
    assert llama_cpp.llama_state_seq_save_file(llm._ctx.ctx, str(slot).encode(), 0, arr, len(prompt)) > 0


def continuation(llm, path, slot, cont):
    """Restore a session (or slot) file and feed `cont`: logits of each step."""
    llm.reset()
    ctx = llm._ctx.ctx
    mem = llama_cpp.llama_get_memory(ctx)
    llama_cpp.llama_memory_clear(mem, True)
    toks = (llama_cpp.llama_token * 1024)()
    n = ctypes.c_size_t(0)
    if slot:
        ok = llama_cpp.llama_state_seq_load_file(ctx, str(path).encode(), 0, toks, 1024, ctypes.byref(n)) > 0
    else:
        ok = llama_cpp.llama_state_load_file(ctx, str(path).encode(), toks, 1024, ctypes.byref(n))
    assert ok, f"llama.cpp did not restore {path.name}"
    n = n.value
    llm.n_tokens = n
    llm.input_ids[:n] = list(toks[:n])
    llm.eval(list(cont))
    return np.array(llm.scores[n : n + len(cont)], dtype=np.float64)


def step_kl(ref, test):
    lp, lq = log_softmax(ref), log_softmax(test)
    return (np.exp(lp) * (lp - lq)).sum(axis=1)


def tq(*args):
    r = subprocess.run([TQ, *map(str, args), "-q"], capture_output=True, text=True)
    assert r.returncode == 0, f"tq {' '.join(map(str, args))}: {r.stderr.strip()}"


def check(d, name, fails):
    if name in ("llama", "qwen2", "qwen3"):  # _models.py's: heads of 64, GQA 4, outlier channels
        model = d / f"tiny-{name}.gguf"
        _models.make_model(model, None, 64, arch=name, n_embd=None if name == "qwen2" else 128, gains=True,
                           outliers=4, k_outliers=2)
    else:
        model = Path(_tiny_models.build(name, d))
    llm = llm_of(model)
    rng = np.random.default_rng(len(name))
    toks = [1] + rng.integers(3, _tiny_models.VOCAB, PROMPT + CONT).tolist()
    prompt, cont = toks[:PROMPT], toks[PROMPT:]
    files = {"session": d / f"{name}.ggsn", "slot": d / f"{name}.ggsq"}
    save(llm, prompt, files["session"], files["slot"])
    for kind, src in files.items():
        slot = kind == "slot"
        ref = continuation(llm, src, slot, cont)
        kl = {}
        for with_model in (0, 1):
            m = ["--model", model] if with_model else []
            snap, back = d / f"{name}-{kind}-{with_model}.tqkv", d / f"{name}-{kind}-{with_model}.out"
            tq("encode-kvdump", src, "-o", snap, "--preset", "lossless", *m)
            tq("decode-kvdump", snap, "-o", back)
            if back.read_bytes() != src.read_bytes():
                fails.append(f"{name} {kind}{' --model' if with_model else ''}: lossless not identical")
            tq("encode-kvdump", src, "-o", snap, *m)
            tq("decode-kvdump", snap, "-o", back)
            kl[with_model] = step_kl(ref, continuation(llm, back, slot, cont))
        if name == "deepseek2":  # the MLA latent in a transform of its own, whole
            snap, back = d / f"{name}-{kind}-latent.tqkv", d / f"{name}-{kind}-latent.out"
            tq("encode-kvdump", src, "-o", snap, "--model", model, "--transform", "on")
            tq("decode-kvdump", snap, "-o", back)
            info = subprocess.run([TQ, "inspect", "--json", snap], capture_output=True, text=True).stdout
            lat = step_kl(ref, continuation(llm, back, slot, cont))
            print(f"{name:14s} {kind:7s} the latent transform-coded: mean KL {lat.mean():.3g}")
            if '"klt"' not in info or '"group": 80' not in info:
                fails.append(f"{name} {kind}: the latent was not transform-coded whole (80 values)")
            if not lat.mean() < 4 * kl[1].mean():
                fails.append(f"{name} {kind}: latent transform KL {lat.mean():.3g}, over 4x {kl[1].mean():.3g}")
        quarters = [float(q.mean()) for q in np.array_split(kl[0], 4)]
        noise = float(np.std(quarters)) / 2  # the spread of a mean over 32 steps (4 quarters of 8)
        a, b = float(kl[0].mean()), float(kl[1].mean())
        print(f"{name:14s} {kind:7s} mean KL without --model {a:.3g}, with {b:.3g} (noise {noise:.2g})")
        if b > a + 2 * noise + 1e-9:
            fails.append(f"{name} {kind}: with --model KL {b:.5f} over {a:.5f} + 2 x noise {noise:.5f}")
        if name.startswith("gemma4"):  # sliding and global layers of one width or of two
            first16 = float(kl[1][:16].mean())
            GEMMA4_KL16[f"{name} {kind}"] = first16
            print(f"{name:14s} {kind:7s} with --model, mean KL over the first 16 steps {first16:.3g}")
            if first16 > 0.1:
                fails.append(f"{name} {kind}: mean KL over 16 steps {first16:.4f} over 0.1")
    del llm


def refuse(args, want, fails, out):
    r = subprocess.run([TQ, *map(str, args)], capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    if r.returncode != 1 or len(lines) != 1 or want not in r.stderr or out.exists():
        fails.append(f"tq {' '.join(map(str, args[:2]))}: exit {r.returncode}, {r.stderr.strip()!r}, "
                     f"output {'left' if out.exists() else 'none'} (wanted {want!r})")


def refusals(d, fails):
    """A state for another model's memory, and Llama.save_state()'s buffer (llama_state_get_data:
    no header), are refused in one line that names what was found, with nothing written."""
    models = {n: Path(_tiny_models.build(n, d)) for n in ("mistral3", "qwen35", "deepseek2")}
    states = {n: d / f"{n}.ggsn" for n in models}  # saved by check()
    out = d / "refused.tqkv"
    refuse(["encode-kvdump", states["qwen35"], "-o", out, "--model", models["mistral3"]],
           "the model keeps K/V in 2", fails, out)
    refuse(["encode-kvdump", states["mistral3"], "-o", out, "--model", models["qwen35"]],
           "the model keeps K/V in 1", fails, out)
    refuse(["encode-kvdump", states["deepseek2"], "-o", out, "--model", models["mistral3"]],
           "an MLA cache", fails, out)
    llm = llm_of(models["mistral3"])
    llm.eval([1, 5, 6, 7])
    buf = d / "buffer.bin"
    buf.write_bytes(bytes(llm.save_state().llama_state))
    del llm
    for cmd in (["inspect", buf], ["encode-kvdump", buf, "-o", out]):
        refuse(cmd, "a llama_state_get_data buffer", fails, out)
    # an architecture whose facts are not verified (arch.c, column ok 0): --model says so in one
    # line and codes the state as without the model's facts
    m = Path(_tiny_models.build("lfm2moe", d))
    llm = llm_of(m)
    llm.eval([1] + list(range(5, 40)))
    state = d / "lfm2moe.ggsn"
    arr = (llama_cpp.llama_token * 36)(*([1] + list(range(5, 40))))
    assert llama_cpp.llama_state_save_file(llm._ctx.ctx, str(state).encode(), arr, 36)
    del llm
    r = subprocess.run([TQ, "encode-kvdump", state, "-o", out, "--model", m], capture_output=True, text=True)
    notes = [ln for ln in r.stderr.splitlines() if "not verified" in ln]
    if r.returncode or len(notes) != 1 or "lfm2moe" not in notes[0]:
        fails.append(f"unverified lfm2moe: exit {r.returncode}, {r.stderr.strip()!r}")
    out.unlink(missing_ok=True)


def main():
    failed = 0
    with tempfile.TemporaryDirectory() as td:
        for name in ARCHS:  # one behaviour an architecture
            fails = []
            try:
                check(Path(td), name, fails)
            except (AssertionError, ValueError) as e:  # ValueError: llama.cpp did not load it
                fails.append(str(e))
            print(f"FAIL: {name}: " + "; ".join(fails) if fails else f"ok {name}", flush=True)
            failed += bool(fails)
        print("gemma4, 16-step KL with --model: " +
              ", ".join(f"{k} {v:.3g}" for k, v in sorted(GEMMA4_KL16.items())))
        fails = []
        refusals(Path(td), fails)
        print("FAIL: refusals: " + "; ".join(fails) if fails else "ok refusals", flush=True)
        failed += bool(fails)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
