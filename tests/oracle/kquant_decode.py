"""tq decodes ggml's K-quants (q2_K .. q6_K) and IQ4_NL / IQ4_XS exactly as
gguf-py's reference dequantizer (ggml's dequantize_row_* in numpy): every
float equal bit for bit, on generated blocks with extreme super-scales
(largest fp16, subnormals, zero, negative) and on every tensor of Gemma 3
270M (Q4_K_M: q4_K, q5_0, q6_K, q8_0 and f32 tensors)."""
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import ROOT, gemma, need  # noqa: E402

np, gguf = need("numpy", "gguf")
from gguf.quants import dequantize  # noqa: E402

TOOL = str(ROOT / "build" / "tests" / "gguf-tensor-f32")
Q = gguf.GGMLQuantizationType
# where each type's fp16 super-scales sit in a block
HALVES = {Q.Q2_K: (80, 82), Q.Q3_K: (108,), Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208,), Q.IQ4_NL: (0,),
          Q.IQ4_XS: (0,)}


def tq_values(model, name, n):
    p = subprocess.run([TOOL, str(model), name], capture_output=True)
    if p.returncode:
        raise SystemExit(f"gguf-tensor-f32 {name}: {p.stderr.decode()}")
    y = np.frombuffer(p.stdout, dtype=np.float32)
    assert y.size == n, (name, y.size, n)
    return y


def same(a, b):
    a, b = np.asarray(a, np.float32).ravel(), np.asarray(b, np.float32).ravel()
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def generated(d):
    rng = np.random.default_rng(11)
    specials = np.array([0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x03FF, 0x0000, 0x8000, 0x3C00, 0x1400], np.uint16)
    path = d / "kq.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    blocks = {}
    for qt, halves in HALVES.items():
        vals, size = gguf.GGML_QUANT_SIZES[qt]
        nb = 64
        b = rng.integers(0, 256, size=(nb, size), dtype=np.uint8)
        for off in halves:  # finite fp16 scales, the extremes among them
            h = np.where(rng.random(nb) < 0.5, specials[rng.integers(0, len(specials), nb)],
                         rng.integers(0, 0x7BFF, nb).astype(np.uint16) | (rng.integers(0, 2, nb) << 15).astype(np.uint16))
            b[:, off:off + 2] = h.astype("<u2").view(np.uint8).reshape(nb, 2)
        blocks[qt] = b
        w.add_tensor(f"t.{qt.name}", b.reshape(1, -1), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    for qt, b in blocks.items():
        vals = gguf.GGML_QUANT_SIZES[qt][0]
        want = dequantize(b.reshape(-1), qt)
        got = tq_values(path, f"t.{qt.name}", b.shape[0] * vals)
        assert same(got, want), f"{qt.name}: {np.flatnonzero(got.view(np.uint32) != want.ravel().view(np.uint32))[:5]}"
    print(f"generated blocks: {', '.join(q.name for q in blocks)} decode bit-exactly (64 blocks each, extreme scales)")


def model_tensors():
    path = gemma()
    r = gguf.GGUFReader(str(path))
    counts = {}
    for t in r.tensors:
        want = dequantize(t.data, t.tensor_type)
        got = tq_values(path, t.name, int(np.prod(t.shape)))
        assert same(got, want), f"{t.name} ({t.tensor_type.name})"
        counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
    print(f"Gemma 3 270M: all {len(r.tensors)} tensors decode bit-exactly ({counts})")


with tempfile.TemporaryDirectory() as d:
    generated(Path(d))
model_tensors()
print("ok kquants_decode_bit_for_bit_as_gguf_py")  # the behaviour, for tests/run.sh (reached only when every check passed)
