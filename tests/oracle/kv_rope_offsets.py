"""RoPE-aware K offsets (encode-kvdump --k-offset rope), on generated
sessions whose K is a pre-RoPE mean turned by RoPE plus noise, k = R(pos) b +
e, with the model's metadata (llama: adjacent pairs; qwen2: NeoX halves;
partial RoPE; linear scaling) and cells at positions with a gap (two runs).
The encoder must pick the pre-RoPE offset (inspect --json), store the
rotation, and decode without the model to an error well under the plain
mean's; an appended snapshot reuses the base's rotation; a model whose RoPE
tq cannot rebuild (YaRN) falls back to the mean.  Exit 77 = oracle missing."""
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import tq, need  # noqa: E402

np, gguf = need("numpy", "gguf")  # before _sessions, which imports numpy
from _sessions import write_session  # noqa: E402

LAYERS, HEADS, HD, CELLS = 2, 2, 64, 400


def rope(b, pos, n_rot, neox, base, scale):
    """R(pos) b for rows of HEADS heads, as llama.cpp turns K"""
    out = np.repeat(b[None, :], len(pos), 0).reshape(len(pos), HEADS, HD).astype(np.float64)
    th = np.asarray(pos, np.float64)[:, None] * scale * base ** (-2.0 * np.arange(n_rot // 2) / n_rot)
    c, s = np.cos(th)[:, None, :], np.sin(th)[:, None, :]
    i0 = np.arange(n_rot // 2) if neox else 2 * np.arange(n_rot // 2)
    i1 = i0 + n_rot // 2 if neox else i0 + 1
    x0, x1 = out[:, :, i0].copy(), out[:, :, i1].copy()
    out[:, :, i0], out[:, :, i1] = x0 * c - x1 * s, x0 * s + x1 * c
    return out.reshape(len(pos), HEADS * HD)


def model(path, arch, n_rot, base, scaling=None):
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(LAYERS)
    w.add_head_count(HEADS * 2)
    w.add_head_count_kv(HEADS)
    w.add_embedding_length(HEADS * 2 * HD)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_rope_dimension_count(n_rot)
    w.add_rope_freq_base(base)
    if scaling:
        w.add_rope_scaling_type(gguf.RopeScalingType[scaling[0].upper()])
        w.add_rope_scaling_factor(scaling[1])
    w.add_tensor("dummy", np.zeros(8, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    rng = np.random.default_rng(5)
    pos = np.concatenate([np.arange(300), 1000 + np.arange(CELLS - 300)])  # two runs
    err = lambda x, y: float(((x.astype(np.float64) - y) ** 2).sum() / (x.astype(np.float64) ** 2).sum())
    cases = [("llama", 64, False, 10000.0, None), ("qwen2", 64, True, 10000.0, None),
             ("llama", 32, False, 500.0, None), ("llama", 64, False, 10000.0, ("linear", 4.0))]
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        for arch, n_rot, neox, base, scaling in cases:
            scale = 1.0 / scaling[1] if scaling else 1.0
            bs = [rng.standard_normal(HEADS * HD) * 3 for _ in range(LAYERS)]
            noise = rng.standard_normal((LAYERS, CELLS, HEADS * HD))
            k = [rope(bs[l], pos, n_rot, neox, base, scale) + noise[l] for l in range(LAYERS)]
            write_session(d / "s.ggsn", LAYERS, HEADS * HD, CELLS, positions=pos,
                          k_rows=lambda l, c0, n: k[l][c0 : c0 + n], arch=arch)
            model(d / "m.gguf", arch, n_rot, base, scaling)
            got = {}
            for ko in ("rope", "mean"):
                tq("encode-kvdump", d / "s.ggsn", "--model", d / "m.gguf", "--k-offset", ko, "-q", "-o", d / f"{ko}.tqkv")
                tq("decode-kvdump", d / f"{ko}.tqkv", "--format", "npz", "-q", "-o", d / f"{ko}.npz")
                ts = json.loads(tq("inspect", "--json", d / f"{ko}.tqkv").stdout)["tensors"]
                ks = [t for t in ts if t["kv"] == "K"]
                assert all(t.get("offset") for t in ks), (arch, ko, ks[0])
                assert all(("offset_rope" in t) == (ko == "rope") for t in ks), (arch, ko, ks[0])
                if ko == "rope":
                    r = ks[0]["offset_rope"]
                    assert r["n_rot"] == n_rot and abs(r["freq_base"] - base) < 1e-3 and abs(r["freq_scale"] - scale) < 1e-6, r
                z = np.load(d / f"{ko}.npz")
                got[ko] = np.mean([err(k[l][1:], z[f"k_{l}"][1:]) for l in range(LAYERS)])  # past the sink cell
            print(f"{arch} n_rot {n_rot} base {base} {scaling}: K rel. MSE mean offset {got['mean']:.5f}, "
                  f"RoPE-aware {got['rope']:.5f}")
            assert got["rope"] < 0.5 * got["mean"], got
        # --append: a base of the first 300 cells, then the whole; rows decode with the base's rotation
        tq("encode-kvdump", d / "s.ggsn", "--preset", "lossless", "-q", "-o", d / "l.tqkv")
        tq("decode-kvdump", d / "l.tqkv", "--tokens", "300", "-q", "-o", d / "p.ggsn")
        tq("encode-kvdump", d / "p.ggsn", "--model", d / "m.gguf", "--k-offset", "rope", "-q", "-o", d / "base.tqkv")
        tq("encode-kvdump", d / "s.ggsn", "--model", d / "m.gguf", "--append", d / "base.tqkv", "-q", "-o", d / "app.tqkv")
        tq("decode-kvdump", d / "app.tqkv", "--format", "npz", "-q", "-o", d / "app.npz")
        z = np.load(d / "app.npz")
        e = np.mean([err(k[l][1:], z[f"k_{l}"][1:]) for l in range(LAYERS)])
        assert e < 2 * got["rope"], (e, got)
        ts = json.loads(tq("inspect", "--json", d / "app.tqkv").stdout)["tensors"]
        assert all("offset_rope" in t for t in ts if t["kv"] == "K"), ts[0]
        # YaRN: not rebuilt, the mean instead
        model(d / "y.gguf", "llama", 64, 10000.0, ("yarn", 4.0))
        tq("encode-kvdump", d / "s.ggsn", "--model", d / "y.gguf", "--k-offset", "rope", "-q", "-o", d / "y.tqkv")
        ts = json.loads(tq("inspect", "--json", d / "y.tqkv").stdout)["tensors"]
        assert all(t.get("offset") and "offset_rope" not in t for t in ts if t["kv"] == "K"), ts[0]
    print("RoPE-aware K offsets: OK")


main()
print("ok rope_aware_offsets_restore_close")  # the behaviour, for tests/run.sh (reached only when every check passed)
