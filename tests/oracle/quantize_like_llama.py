"""tq quantize-tq4 writes the tensors llama-quantize writes: same type chosen
for every tensor (llama-quantize's fallbacks for rows that are not whole
superblocks included) and the same bytes, against llama.cpp's own
llama_model_quantize on a generated llama model whose FFN widths differ per
layer (768: whole superblocks; 800: only blocks of 32, q4_K -> q5_0;
792: not even those, -> F16).
- The fork's Config I recipe (`llama-quantize --allow-requantize
  --tensor-type-file config_i.txt in-Q8_0.gguf out.gguf Q8_0`) on a Q8_0
  model: tq's default config-i equals it tensor for tensor, except that the
  attention and FFN gate/up tensors llama.cpp leaves in q8_0 (it has no
  TQ4_1S) are TQ4_1S in tq's file.
- Every weight in q4_K, q5_K and q6_K from F32, without and with an
  importance matrix (the same values given to both, as a legacy .dat file to
  tq and as llama_model_imatrix_data to llama.cpp)."""
import ctypes
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import need, tokenizer_source, tq  # noqa: E402

np, gguf, llama_cpp = need("numpy", "gguf", "llama_cpp")
from _models import make_model  # noqa: E402

Q = gguf.GGMLQuantizationType
FTYPE_Q8_0 = 7
TQ4_1S = 46              # the fork's type id (formats/gguf/GGUF.md)
FORK = {TQ4_1S: (32, 20)}
N_FF = [512, 512, 768, 800, 792, 512, 512]


def llama_quantize(src, dst, rules, imatrix=None):
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype, p.allow_requantize, p.nthread = FTYPE_Q8_0, True, 2
    keep = []
    if rules:
        arr = (llama_cpp.llama_model_tensor_override * (len(rules) + 1))()
        for i, (pat, t) in enumerate(rules):
            keep.append(pat.encode())
            arr[i].pattern, arr[i].type = keep[-1], int(t)
        p.tt_overrides = ctypes.cast(arr, ctypes.POINTER(llama_cpp.llama_model_tensor_override))
    if imatrix:
        arr = (llama_cpp.llama_model_imatrix_data * (len(imatrix) + 1))()
        for i, (name, v) in enumerate(imatrix.items()):
            keep.append(name.encode())
            arr[i].name, arr[i].size = keep[-1], v.size
            arr[i].data = v.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        p.imatrix = ctypes.cast(arr, ctypes.POINTER(llama_cpp.llama_model_imatrix_data))
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(p))
    assert rc == 0, f"llama_model_quantize failed ({rc})"


def tensors(path):
    """name -> (type id, raw bytes); read here because gguf-py refuses the
    fork's type ids."""
    import struct
    b = Path(path).read_bytes()
    magic, _, n_t, n_kv = struct.unpack_from("<4sIQQ", b, 0)
    assert magic == b"GGUF"
    o = 24

    def string(o):
        n = struct.unpack_from("<Q", b, o)[0]
        return b[o + 8:o + 8 + n].decode(), o + 8 + n
    size = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    align = 32

    def value(o, t):
        if t == 8:
            return string(o)
        if t == 9:
            et, n = struct.unpack_from("<IQ", b, o)
            o += 12
            out = []
            for _ in range(n):
                v, o = value(o, et)
                out.append(v)
            return out, o
        v = b[o:o + size[t]]
        return int.from_bytes(v, "little"), o + size[t]
    for _ in range(n_kv):
        k, o = string(o)
        t = struct.unpack_from("<I", b, o)[0]
        v, o = value(o + 4, t)
        if k == "general.alignment":
            align = v
    infos = []
    for _ in range(n_t):
        name, o = string(o)
        nd = struct.unpack_from("<I", b, o)[0]
        ne = struct.unpack_from(f"<{nd}Q", b, o + 4)
        t, off = struct.unpack_from("<IQ", b, o + 4 + 8 * nd)
        o += 4 + 8 * nd + 12
        infos.append((name, t, off, int(np.prod(ne))))
    base = (o + align - 1) // align * align
    out = {}
    for name, t, off, n in infos:
        vals, bs = (1, 4) if t == 0 else (1, 2) if t == 1 else gguf.GGML_QUANT_SIZES.get(Q(t), (0, 0)) if t in Q._value2member_map_ else FORK.get(t)
        out[name] = (t, b[base + off:base + off + n // vals * bs])
    return out


def write_dat(path, imatrix):
    with open(path, "wb") as f:
        f.write(np.int32(len(imatrix)).tobytes())
        for name, v in imatrix.items():
            b = name.encode()
            f.write(np.array([len(b)], np.int32).tobytes() + b + np.array([1, v.size], np.int32).tobytes())
            f.write(v.astype(np.float32).tobytes())


def compare(label, want, got, fork_only=()):
    assert want.keys() == got.keys(), (label, set(want) ^ set(got))
    same = differs = 0
    for name, (wt, wb) in want.items():
        gt, gb = got[name]
        if name in fork_only:
            assert wt == Q.Q8_0 and gt == TQ4_1S, (label, name, wt, gt)
            continue
        if wt != gt or wb != gb:
            print(f"FAIL {label}: {name}: llama.cpp wrote {Q(wt).name} ({len(wb)} B), tq type {gt} "
                  f"({len(gb)} B){'' if wt != gt else ', different bytes'}")
            differs += 1
        else:
            same += 1
    if differs:
        sys.exit(1)
    return same


def main():
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        f32 = d / "f32.gguf"
        make_model(f32, tokenizer_source(), 128, n_head=2, n_head_kv=1, n_layer=len(N_FF), n_embd=256, n_ff=N_FF, gains=True,
                   outliers=3)
        q8 = d / "q8.gguf"
        llama_quantize(f32, q8, [(".*", Q.Q8_0)])
        # Config I: boundary layers first (llama-quantize takes the first matching rule)
        llama_quantize(q8, d / "ci-llama.gguf", [(r"blk\.(0|1|5|6)\.", Q.Q8_0), ("ffn_down", Q.Q4_K)])
        tq("quantize-tq4", "-q", "--allow-requantize", q8, d / "ci-tq.gguf")
        want, got = tensors(d / "ci-llama.gguf"), tensors(d / "ci-tq.gguf")
        fork = {n for n in got if any(f"blk.{l}." in n for l in (2, 3, 4)) and
                any(r in n for r in ("attn_q.", "attn_k.", "attn_v.", "attn_output.", "ffn_gate.", "ffn_up."))}
        types = sorted({Q(want[n][0]).name for n in want if "ffn_down" in n})
        assert types == ["F16", "Q4_K", "Q5_0", "Q8_0"], types  # the model reaches every fallback
        n = compare("config-i", want, got, fork)
        print(f"config-i: {n} tensors identical to llama-quantize's Config I recipe "
              f"(ffn_down {', '.join(types)}), {len(fork)} in tq4_1s where llama.cpp has no such type")
        rng = np.random.default_rng(5)
        r = gguf.GGUFReader(str(f32))
        imatrix = {t.name: (rng.random(int(t.shape[0])) ** 3 * 10).astype(np.float32)
                   for t in r.tensors if len(t.shape) == 2 and t.name.endswith("weight")}
        write_dat(d / "im.dat", imatrix)
        total = 0
        for qt in (Q.Q4_K, Q.Q5_K, Q.Q6_K):
            plain = None
            for im in (None, imatrix):
                name = qt.name.lower().replace("_k", "_K")
                llama_quantize(f32, d / "l.gguf", [(".*", qt)], im)
                args = ["quantize-tq4", "-q", "--policy", "all", "--boundary-layers", "0", "--tensor-type", f".*={name}"]
                tq(*args, *(["--imatrix", d / "im.dat"] if im else []), f32, d / "t.gguf")
                got = tensors(d / "t.gguf")
                n = compare(f"{name}{' imatrix' if im else ''}", tensors(d / "l.gguf"), got)
                total += n
                print(f"{name}{' with imatrix' if im else ''}: all {n} tensors identical to llama_model_quantize's")
                if plain is None:
                    plain = got
                else:  # the importances changed the weighted types' bytes (q8_0 and F16 fallbacks excepted)
                    moved = sum(got[k][1] != plain[k][1] for k in imatrix)
                    assert moved >= len(imatrix) - 4, f"{name}: the imatrix changed only {moved} tensors"
        # a K-quant model in (as distributed): refused without --allow-requantize, converted with it
        llama_quantize(f32, d / "k.gguf", [(".*", Q.Q4_K)])
        p = tq("quantize-tq4", d / "k.gguf", d / "kc.gguf", ok=False)
        assert p.returncode == 1 and "--allow-requantize" in p.stderr and not (d / "kc.gguf").exists(), p.stderr
        tq("quantize-tq4", "-q", "--allow-requantize", d / "k.gguf", d / "kc.gguf")
        kc = tensors(d / "kc.gguf")
        assert kc["blk.2.ffn_down.weight"][0] == Q.Q4_K and kc["blk.2.attn_q.weight"][0] == TQ4_1S, "config-i from q4_K"
        assert kc["blk.2.ffn_down.weight"][1] == tensors(d / "k.gguf")["blk.2.ffn_down.weight"][1], "same type: copied"
        print(f"ok: config-i and {total} q4_K/q5_K/q6_K tensors (with and without imatrix) byte-identical to llama.cpp's")


main()
print("ok quantize_bytes_equal_llama_quantize")  # the behaviour, for tests/run.sh (reached only when every check passed)
