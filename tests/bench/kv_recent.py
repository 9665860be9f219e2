"""kv_recent.py [--recent=512] [--kind=kv|k|v] [--sessions=docs,code] [SWITCHES] - what
keeping the most recent cells exact could buy (a benchmark, not a test): each long Gemma
3 270M session (tests/bench/long_sessions.py) is encoded with SWITCHES and
decoded, then the last `recent` cells of every K and V tensor (or K's or V's
only, --kind) are copied back
from the original state (the tensors' places read from the snapshot's
records, formats/tqkv/TQKV.md), and both states are restored in llama.cpp and
fed the next 128 tokens in one batch.  KL against the uncompressed restore,
over the floor (that restore fed one token a call).  The copy is an upper
bound on what any finer coding of those cells could give; its cost, were
they stored in f16, is printed beside.
TQ_ORACLES/bin/python3 tests/bench/kv_recent.py --recent=512"""
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import TQ, gemma  # noqa: E402
from long_sessions import session_path, split_options, table_head  # noqa: E402
from _llama_util import compare  # noqa: E402
import llama_cpp  # noqa: E402

ARGV, sys.argv = sys.argv, sys.argv[:1]  # kv_long reads its own options when imported
import kv_long  # noqa: E402

sys.argv = ARGV

OPTS, SWITCHES = split_options(("--recent=", "--sessions=", "--kind="))
RECENT = int(OPTS.get("--recent", 512))
SESSIONS = OPTS.get("--sessions", "docs,code").split(",")
KIND = OPTS.get("--kind", "kv")


def records(snap):
    """(file_off, bytes, cells, kv_state, is_v) of every K/V tensor, from a .tqkv's metadata."""
    b = Path(snap).read_bytes()
    p = 32 + 24  # header; kind, flag, pad, version, source size, fingerprint
    (n_tok,) = struct.unpack_from("<I", b, p)
    p += 4 + 4 * n_tok
    for _ in range(2):  # architecture, profile
        (n,) = struct.unpack_from("<I", b, p)
        p += 4 + n
    (n,) = struct.unpack_from("<I", b, p + 8)  # base id, base name
    p += 12 + n
    (stored,) = struct.unpack_from("<Q", b, p + 8)  # skeleton length, stored length
    p += 16 + stored
    (nt,) = struct.unpack_from("<I", b, p)
    p += 4
    out = []
    for i in range(nt):
        off, size, kv_state = struct.unpack_from("<QQI", b, p + 72 * i)
        (cells,) = struct.unpack_from("<I", b, p + 72 * i + 48)
        out.append((off, size, cells, kv_state, b[p + 72 * i + 28]))
    return out


def main():
    g = gemma()
    llm = llama_cpp.Llama(model_path=str(g), n_ctx=32768, n_batch=512, logits_all=False, verbose=False,
                          flash_attn=True)
    table_head("session", "switches", "bits per K/V value", "KL / floor", "last cells exact", "KL / floor",
               "their f16 cost, bits per value")
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        for sess in SESSIONS:
            state = session_path(sess)
            cont = np.load(state.with_suffix(".cont.npy")).tolist()
            ref = kv_long.run(llm, state, cont)
            floor = compare(ref, kv_long.run(llm, state, cont, one_by_one=True))[0]
            subprocess.run([TQ, "encode-kvdump", state, "-q", "-o", d / "x.tqkv", "--model", g, *SWITCHES],
                           check=True)
            subprocess.run([TQ, "decode-kvdump", d / "x.tqkv", "-q", "-o", d / "x.ggsn"], check=True)
            bits = 8 * (d / "x.tqkv").stat().st_size / (18 * 2 * 256 * 24576)
            kl = compare(ref, kv_long.run(llm, d / "x.ggsn", cont))[0]
            src, dst = state.read_bytes(), bytearray((d / "x.ggsn").read_bytes())
            for off, size, cells, _, is_v in records(d / "x.tqkv"):
                if "kv"[is_v] not in KIND:
                    continue
                row = size // cells
                a = off + (cells - RECENT) * row
                dst[a : off + size] = src[a : off + size]
            (d / "y.ggsn").write_bytes(bytes(dst))
            kl2 = compare(ref, kv_long.run(llm, d / "y.ggsn", cont))[0]
            print(f"| {sess} | `{' '.join(SWITCHES)}` | {bits:.3f} | {kl / floor:.2f} | {RECENT} | "
                  f"{kl2 / floor:.2f} | +{len(KIND) / 2 * (16 - bits) * RECENT / 24576:.3f} ({KIND}) |",
                  flush=True)


if __name__ == "__main__":
    main()
