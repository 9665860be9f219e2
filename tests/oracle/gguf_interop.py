"""GGUF interop with the reference reader/writer (PyPI gguf, i.e. gguf-py):
files gguf-py writes read identically in tq (via `tq inspect --json`), and
files tq writes (build/tests/gguf-rewrite) load in gguf-py with identical
keys, values, tensor names, shapes, types and bytes.  Exit 77 = oracle missing."""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import numpy as np
    import gguf
except ImportError as e:
    print(f"{e.name} not installed (pip install gguf numpy)")
    sys.exit(77)

ROOT = Path(__file__).resolve().parents[2]
TQ = ROOT / "tq"
REWRITE = ROOT / "build" / "tests" / "gguf-rewrite"
SHARED = Path(os.environ.get("TQ_SHARED") or ROOT.parent / "shared")
T = gguf.GGUFValueType


def write_reference(path):
    """Every value type, arrays, non-default alignment, F32/F16/BF16/Q8_0/Q4_0."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_custom_alignment(64)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.1)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo \"world\"\n")
    w.add_uint64("t.u64", 18000000000000000000)
    w.add_int64("t.i64", -9000000000000000000)
    w.add_float64("t.f64", -2.25e-300)
    w.add_array("t.arr_i32", [1, -2, 3])
    w.add_array("t.arr_f32", [0.5, -1.25])
    w.add_array("t.arr_str", ["a", "", "ccc"])
    w.add_array("t.arr_bool", [True, False])
    rng = np.random.default_rng(0)
    w.add_tensor("f32.weight", rng.standard_normal((3, 64)).astype(np.float32))
    w.add_tensor("f16.weight", rng.standard_normal((2, 32)).astype(np.float16))
    raw = rng.integers(0, 256, size=(2, 64), dtype=np.uint8)
    w.add_tensor("bf16.weight", raw, raw_dtype=gguf.GGMLQuantizationType.BF16)
    q8 = rng.integers(0, 256, size=(4, 2 * 34), dtype=np.uint8)
    q8[:, 1] = 0x3c  # finite fp16 scales are not required by the format, but keep them sane
    w.add_tensor("q8.weight", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    q4 = rng.integers(0, 256, size=(3, 4 * 18), dtype=np.uint8)
    w.add_tensor("q4.weight", q4, raw_dtype=gguf.GGMLQuantizationType.Q4_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def py_value(field):
    """A gguf-py field as a plain Python value, the way tq prints it."""
    vt = field.types[0]
    if vt == T.ARRAY:
        et = field.types[-1]
        items = [field.parts[i] for i in field.data]
        if et == T.STRING:
            return [bytes(x).decode("utf-8") for x in items]
        return [x.tolist()[0] if hasattr(x, "tolist") else x for x in items]
    part = field.parts[field.data[0]]
    if vt == T.STRING:
        return bytes(part).decode("utf-8")
    return part.tolist()[0]


def norm(vt, v):
    if vt == "BOOL":
        return bool(v)
    if vt in ("FLOAT32",):
        return float(np.float32(v))
    return v


def compare_with_tq(path):
    out = subprocess.run([str(TQ), "inspect", "--json", str(path)], check=True, capture_output=True, text=True).stdout
    doc = json.loads(out)
    r = gguf.GGUFReader(str(path))
    fields = [(k, f) for k, f in r.fields.items() if not k.startswith("GGUF.")]
    assert [m["key"] for m in doc["metadata"]] == [k for k, _ in fields], "key order differs"
    for m, (k, f) in zip(doc["metadata"], fields):
        assert m["type"] == f.types[0].name, (k, m["type"], f.types[0].name)
        want = py_value(f)
        if m["type"] == "ARRAY":
            assert m["elem_type"] == f.types[-1].name, k
            got = [norm(m["elem_type"], x) for x in m["value"]]
            want = [norm(m["elem_type"], x) for x in want]
        else:
            got, want = norm(m["type"], m["value"]), norm(m["type"], want)
        assert got == want, (k, got, want)
    assert doc["alignment"] == r.alignment
    assert len(doc["tensors"]) == len(r.tensors)
    for t, rt in zip(doc["tensors"], r.tensors):
        assert t["name"] == rt.name
        assert t["shape"] == [int(x) for x in rt.shape], (t["name"], t["shape"], rt.shape)
        assert t["type"].upper() == rt.tensor_type.name, (t["name"], t["type"], rt.tensor_type.name)
        assert t["bytes"] == rt.n_bytes
        assert t["file_offset"] == rt.data_offset, (t["name"], t["file_offset"], rt.data_offset)
    return r


def same_models(a, b):
    ra, rb = gguf.GGUFReader(str(a)), gguf.GGUFReader(str(b))
    ka = {k: py_value(f) for k, f in ra.fields.items() if not k.startswith("GGUF.")}
    kb = {k: py_value(f) for k, f in rb.fields.items() if not k.startswith("GGUF.")}
    assert ka == kb, "metadata differs"
    assert [t.name for t in ra.tensors] == [t.name for t in rb.tensors]
    for ta, tb in zip(ra.tensors, rb.tensors):
        assert list(ta.shape) == list(tb.shape) and ta.tensor_type == tb.tensor_type, ta.name
        assert bytes(ta.data.tobytes()) == bytes(tb.data.tobytes()), ta.name


with tempfile.TemporaryDirectory() as d:
    d = Path(d)
    ref = d / "ref.gguf"
    write_reference(ref)
    compare_with_tq(ref)  # gguf-py writes, tq reads
    out = d / "tq.gguf"
    subprocess.run([str(REWRITE), str(ref), str(out)], check=True)
    assert out.read_bytes() == ref.read_bytes(), "tq's rewrite of a gguf-py file is not byte-identical"
    same_models(ref, out)  # tq writes, gguf-py reads
    out2 = d / "tq_align.gguf"
    subprocess.run([str(REWRITE), str(ref), str(out2), "align=128", "tag"], check=True)
    compare_with_tq(out2)
    same_models_except = gguf.GGUFReader(str(out2))
    assert same_models_except.alignment == 128
    # a split model written by gguf-py opens as one model from its first shard
    w = gguf.GGUFWriter(str(d / "split.gguf"), "llama", split_max_tensors=2)
    w.add_uint32("llama.block_count", 3)
    rng = np.random.default_rng(1)
    arrays = {f"t{i}.weight": rng.standard_normal((2, 32)).astype(np.float32) for i in range(5)}
    for k, v in arrays.items():
        w.add_tensor(k, v)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    shards = sorted(d.glob("split-*-of-*.gguf"))
    assert len(shards) == 3, shards
    doc = json.loads(subprocess.run([str(TQ), "inspect", "--json", str(shards[0])], check=True,
                                    capture_output=True, text=True).stdout)
    assert [t["name"] for t in doc["tensors"]] == list(arrays), doc["tensors"]
    assert [t["shard"] for t in doc["tensors"]] == [0, 0, 1, 1, 2]
    assert len(doc["shards"]) == 3 and doc["file_size"] == sum(p.stat().st_size for p in shards)
    res = subprocess.run([str(TQ), "inspect", str(shards[1])], capture_output=True, text=True)
    assert res.returncode == 1 and "open shard 1" in res.stderr, res.stderr
    shards[2].unlink()
    res = subprocess.run([str(TQ), "inspect", str(shards[0])], capture_output=True, text=True)
    assert res.returncode == 1 and "split-00003-of-00003.gguf: cannot open" in res.stderr, res.stderr

    stories = SHARED / "models" / "stories260K.gguf"
    if stories.exists():
        s2 = d / "stories.gguf"
        subprocess.run([str(REWRITE), str(stories), str(s2)], check=True)
        assert s2.read_bytes() == stories.read_bytes(), "stories260K rewrite is not byte-identical"
        compare_with_tq(stories)
        # split output: shards gguf-py reads one by one, and tq as one model again
        sp = d / "st.gguf"
        subprocess.run([str(REWRITE), str(stories), str(sp), "split=300000"], check=True)
        parts = sorted(d.glob("st-*-of-*.gguf"))
        # tensor data 1,171,200 bytes in pieces of at most 300,000 (never cutting a tensor)
        assert len(parts) == 5, parts
        orig = gguf.GGUFReader(str(stories))
        got = [t for p in parts for t in gguf.GGUFReader(str(p)).tensors]
        assert [t.name for t in got] == [t.name for t in orig.tensors]
        for a, b in zip(got, orig.tensors):
            assert a.data.tobytes() == b.data.tobytes(), a.name
        r1 = gguf.GGUFReader(str(parts[1]))
        assert py_value(r1.fields["split.no"]) == 1 and py_value(r1.fields["split.count"]) == 5
        assert py_value(r1.fields["split.tensors.count"]) == 48 and "general.name" not in r1.fields
        back = d / "joined.gguf"
        subprocess.run([str(REWRITE), str(parts[0]), str(back)], check=True)
        assert back.read_bytes() == stories.read_bytes(), "split then joined is not the original"
print("gguf-py and tq agree")
print("ok gguf_py_and_tq_read_each_others_files")  # the behaviour, for tests/run.sh (reached only when every check passed)
