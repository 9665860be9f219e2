"""Gemma 3 270M's two KV caches (iSWA: base cache of the 3 global layers,
then the SWA cache of the other 15) are matched to model layers, and the
match is checked against the model itself rather than against tq's rule:
K is written after the per-layer QK-norm, so each cache layer's per-channel
K energy (RoPE pairs summed, which RoPE leaves unchanged) correlates best
with the attn_k_norm gains of the model layer it belongs to.  Then:
.tqkv records the model layers (inspect), decode --format npz names k_L/v_L
by model layer with the data of the right cache layer, --layers selects
model layers, and encode without --model records the same match from the
state's architecture.  Exit 77 = oracle missing."""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import LLAMA_THREADS, TQ, gemma, need, tq  # noqa: E402

np, gguf, llama_cpp = need("numpy", "gguf", "llama_cpp")
from _llama_util import save_state  # noqa: E402

MODEL = gemma()
HD, N_LAYER = 256, 18
text = (Path(__file__).resolve().parent / "prompts" / "readme.txt").read_bytes()

gains = {}
for t in gguf.GGUFReader(str(MODEL)).tensors:
    if t.name.endswith("attn_k_norm.weight"):
        g = np.asarray(t.data, np.float64)
        gains[int(t.name.split(".")[1])] = g[:HD // 2] ** 2 + g[HD // 2:] ** 2  # NeoX pairs (i, i + 128)
assert len(gains) == N_LAYER

with tempfile.TemporaryDirectory() as d:
    d = Path(d)
    llm = llama_cpp.Llama(model_path=str(MODEL), n_ctx=1024, n_batch=512, verbose=False, **LLAMA_THREADS)
    toks = llm.tokenize(text, add_bos=True)[:600]
    save_state(MODEL, toks, d / "s.ggsn", llm=llm)
    del llm
    tq("encode-kvdump", "-q", d / "s.ggsn", "-o", d / "m.tqkv", "--preset", "lossless", "--model", MODEL)
    tq("decode-kvdump", "-q", d / "m.tqkv", "-o", d / "m.npz", "--format", "npz")
    z = np.load(d / "m.npz")
    names = sorted(k for k in z.files if k != "tokens")
    assert names == sorted([f"k_{l}" for l in range(N_LAYER)] + [f"v_{l}" for l in range(N_LAYER)]), names
    # each exported K: which model layer's k_norm gains its channel energy follows
    for l in range(N_LAYER):
        k = z[f"k_{l}"].astype(np.float64).reshape(len(toks), -1, HD)
        e = (k ** 2).mean(axis=(0, 1))
        e = e[:HD // 2] + e[HD // 2:]
        corr = {m: np.corrcoef(e, g)[0, 1] for m, g in gains.items()}
        best = max(corr, key=corr.get)
        assert best == l, f"k_{l} follows layer {best}'s k_norm gains (r {corr[best]:.3f}, own {corr[l]:.3f})"
    print(f"k_0..k_{N_LAYER - 1}: each K's channel energy follows its own layer's attn_k_norm gains best")
    rec = json.loads(tq("inspect", "--json", d / "m.tqkv").stdout)
    base = [t["model_layer"] for t in rec["tensors"] if t["kv_state"] == 0 and t["kv"] == "K"]
    swa = [t["model_layer"] for t in rec["tensors"] if t["kv_state"] == 1 and t["kv"] == "K"]
    assert base == [5, 11, 17] and swa == [l for l in range(N_LAYER) if l % 6 != 5], (base, swa)
    tq("decode-kvdump", "-q", d / "m.tqkv", "-o", d / "l.npz", "--format", "npz", "--layers", "5-6")
    zl = np.load(d / "l.npz")
    assert sorted(zl.files) == ["k_5", "k_6", "tokens", "v_5", "v_6"], zl.files
    assert np.array_equal(zl["k_5"], z["k_5"]) and np.array_equal(zl["v_6"], z["v_6"])
    # without --model: the same match from the state's architecture, said in the record
    tq("encode-kvdump", "-q", d / "s.ggsn", "-o", d / "a.tqkv", "--preset", "lossless")
    rec2 = json.loads(tq("inspect", "--json", d / "a.tqkv").stdout)
    assert [t.get("model_layer") for t in rec2["tensors"]] == [t["model_layer"] for t in rec["tensors"]]
    p = subprocess.run([TQ, "decode-kvdump", d / "a.tqkv", "-o", d / "x.ggsn", "--model", MODEL], capture_output=True, text=True)
    assert p.returncode != 0 and "no model fingerprint" in p.stderr and not (d / "x.ggsn").exists(), p.stderr
    tq("decode-kvdump", "-q", d / "m.tqkv", "-o", d / "y.ggsn", "--model", MODEL)
    assert (d / "y.ggsn").read_bytes() == (d / "s.ggsn").read_bytes()
    print("ok: iSWA caches matched to model layers (checked against the k_norm gains), recorded, exported by model "
          "layer; --layers by model layer; decode --model accepts them")
print("ok iswa_caches_map_to_model_layers")  # the behaviour, for tests/run.sh (reached only when every check passed)
