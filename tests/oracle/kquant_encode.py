"""tq's ggml encoders give ggml's bytes: q4_K, q5_K, q6_K and the 32-value
q8_0, q4_0, q4_1, q5_0, q5_1 (llama-quantize's fallbacks for rows that are
not whole superblocks), each without and with importance data, against
ggml_quantize_chunk itself (the function llama-quantize calls, from the
libggml-base that llama-cpp-python ships).  Rows with extreme content: all
zeros, constants, one outlier, subnormal and near-fp16-overflow magnitudes,
one sign only, few distinct values; importances with zeros and spikes."""
import ctypes
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import ROOT, need  # noqa: E402

np, gguf, llama_cpp = need("numpy", "gguf", "llama_cpp")
Q = gguf.GGMLQuantizationType
TOOL = str(ROOT / "build" / "tests" / "quantize-rows")
TYPES = {"q4_K": Q.Q4_K, "q5_K": Q.Q5_K, "q6_K": Q.Q6_K, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q4_1": Q.Q4_1,
         "q5_0": Q.Q5_0, "q5_1": Q.Q5_1}


def ggml():
    libdir = Path(llama_cpp.__file__).resolve().parent / "lib"
    for name in ("libggml-base.so", "libggml.so"):
        if (libdir / name).exists():
            lib = ctypes.CDLL(str(libdir / name))
            if hasattr(lib, "ggml_quantize_chunk"):
                f = lib.ggml_quantize_chunk
                f.restype = ctypes.c_size_t
                f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                              ctypes.c_int64, ctypes.c_void_p]
                return f
    print(f"no ggml_quantize_chunk in {libdir}")
    sys.exit(77)


def rows(rng, row_len):
    n = row_len
    g = rng.standard_normal((24, n)).astype(np.float32)
    out = [g[0], g[1] * 1e-3, g[2] * 300.0]
    out.append(np.zeros(n, np.float32))
    out.append(np.full(n, 0.75, np.float32))
    out.append(np.full(n, -2.5, np.float32))
    r = g[3].copy(); r[rng.integers(0, n, 3)] = 40.0; out.append(r)          # outliers
    r = g[4].copy(); r[::37] = -55.0; out.append(r)
    out.append(np.abs(g[5]))                                                  # one sign only
    out.append(-np.abs(g[6]))
    out.append((g[7] * 1e-38).astype(np.float32))                             # subnormal range
    out.append(g[8] * 2e4)                                                    # near fp16's largest
    out.append(rng.integers(-3, 4, n).astype(np.float32))                     # few values
    r = np.zeros(n, np.float32); r[rng.integers(0, n, 5)] = 1.0; out.append(r)  # sparse
    r = g[9].copy(); r[: n // 2] = 0; out.append(r)                          # half-empty superblocks
    out.append((g[10] * np.exp(rng.standard_normal(n) * 2)).astype(np.float32))  # heavy tails
    out.extend(g[11:24])
    return np.ascontiguousarray(np.stack(out).astype(np.float32))


def importances(rng, n):
    w = [rng.random(n).astype(np.float32) * 3, np.ones(n, np.float32)]
    z = rng.random(n).astype(np.float32); z[rng.random(n) < 0.3] = 0; w.append(z)
    s = np.full(n, 1e-3, np.float32); s[rng.integers(0, n, 4)] = 1e3; w.append(s)
    return w


def main():
    quant = ggml()
    rng = np.random.default_rng(2504)
    checked = 0
    for row_len in (256, 768):
        x = rows(rng, row_len)
        for name, qt in TYPES.items():
            vals, size = gguf.GGML_QUANT_SIZES[qt]
            nbytes = x.shape[0] * row_len // vals * size
            for imp in [None] + importances(rng, row_len):
                want = np.zeros(nbytes, np.uint8)
                quant(int(qt), x.ctypes.data, want.ctypes.data, 0, x.shape[0], row_len,
                      None if imp is None else imp.ctypes.data)
                args = [TOOL, name, str(row_len)]
                if imp is not None:
                    f = Path(f"/tmp/tq-imp-{row_len}.f32")
                    imp.tofile(f)
                    args.append(str(f))
                p = subprocess.run(args, input=x.tobytes(), capture_output=True)
                assert p.returncode == 0, p.stderr.decode()
                got = np.frombuffer(p.stdout, np.uint8)
                label = f"{name} rows of {row_len} {'reference' if imp is None else 'weighted'}"
                if got.size != want.size or not np.array_equal(got, want):
                    bad = np.flatnonzero(got != want) if got.size == want.size else [0]
                    blk = bad[0] // size
                    print(f"FAIL {label}: {len(bad)} bytes differ, first in block {blk} "
                          f"(row {blk * vals // row_len})")
                    sys.exit(1)
                checked += want.size
    print(f"ok: {checked} bytes of q4_K/q5_K/q6_K/q8_0/q4_0/q4_1/q5_0/q5_1 equal ggml_quantize_chunk's")


main()
print("ok kquant_bytes_equal_ggml_quantize_chunk")  # the behaviour, for tests/run.sh (reached only when every check passed)
