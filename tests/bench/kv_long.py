"""kv_long.py [--model=gemma|smollm2] [--steps=128] [--sessions=judge|choose|all|NAME,...] [NAME:SWITCHES ...] -
snapshot settings judged at long context (a benchmark, not a test): the sessions of
tests/bench/long_sessions.py (Gemma 3 270M: 24576 tokens, SmolLM2-135M: 7168, of the text
set's held-out texts by default, cached under ~/.cache/tq/long; kv_texts.py reports the worst
text at 128 and 512 steps), each restored in llama.cpp after an
encode/decode round trip, its last cell dropped and re-fed with the next
`steps` tokens in one batch (teacher forcing).  KL and top-1 against the
uncompressed restore fed the same way; the floor is that restore fed one
token a call instead (another summation order).  llama-cpp-python's
logits_all would size its score buffer n_ctx x n_vocab (34 GB here), so
the batch asks for every row's logits itself.  Settings are NAME:SWITCHES
(encode-kvdump switches after --model; `cache=q8_0` or `cache=q4_0` as the
switches: llama.cpp's runtime cache of that type, the session's tokens
prefilled again into it: about 140 s each).  Prints one markdown row per setting with the command's
switches; --svg=PATH draws bits per value against KL / floor (settings whose
names share the part before '/' are joined by a line: a family's curve);
--rows-from=LOG,... adds the table rows of earlier runs' logs (each row as that
run measured it, its switches with --past-bits 0 added where the row was
measured before --past-bits existed and says so with a `[past 0]` name suffix)
to the table and the picture, without measuring them again.
TQ_ORACLES/bin/python3 tests/bench/kv_long.py default: "tq/k3:--transform off --k-bits 3" """
import ctypes
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import TQ  # noqa: E402
from long_sessions import MODELS, session_path, text_names  # noqa: E402
from _llama_util import compare  # noqa: E402
import llama_cpp  # noqa: E402

OPTS = dict(a.split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
STEPS = int(OPTS.get("--steps", 128))
MODEL = OPTS.get("--model", "gemma")
TOKENS = int(OPTS.get("--tokens", MODELS[MODEL]["tokens"]))
N_CTX = MODELS[MODEL]["n_ctx"]
SESSIONS = text_names(OPTS.get("--sessions", "judge"))
ARGS = [a.split(":", 1) if ":" in a else (a, "") for a in sys.argv[1:] if not a.startswith("--")]
SETTINGS = ARGS or ([] if "--rows-from" in OPTS else [("default", "")])


def batch_logits(llm, toks, n0, one_by_one=False):
    """Feeds toks at positions n0.. (one batch, or one token a call); the
    logits of every row, float64 [len(toks), vocab]."""
    ctx = llm._ctx.ctx
    n_vocab = llm.n_vocab()
    out = np.empty((len(toks), n_vocab), dtype=np.float64)
    step = 1 if one_by_one else len(toks)
    for s in range(0, len(toks), step):
        part = toks[s : s + step]
        b = llama_cpp.llama_batch_init(len(part), 0, 1)
        b.n_tokens = len(part)
        for i, t in enumerate(part):
            b.token[i] = t
            b.pos[i] = n0 + s + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1
        assert llama_cpp.llama_decode(ctx, b) == 0, "decode failed"
        for i in range(len(part)):
            p = llama_cpp.llama_get_logits_ith(ctx, i)
            out[s + i] = np.ctypeslib.as_array(p, shape=(n_vocab,))
        llama_cpp.llama_batch_free(b)
    return out


def restore(llm, state):
    """Loads a session file; drops its last cell; returns (tokens, n kept)."""
    ctx = llm._ctx.ctx
    mem = llama_cpp.llama_get_memory(ctx)
    llama_cpp.llama_memory_clear(mem, True)
    toks = (llama_cpp.llama_token * (TOKENS + 8))()
    n = ctypes.c_size_t(0)
    assert llama_cpp.llama_state_load_file(ctx, str(state).encode(), toks, TOKENS + 8, ctypes.byref(n)), \
        f"restore of {state} failed"
    n = n.value
    llama_cpp.llama_memory_seq_rm(mem, 0, n - 1, -1)
    return list(toks[:n]), n - 1


def run(llm, state, cont, one_by_one=False):
    toks, n = restore(llm, state)
    return batch_logits(llm, [toks[n]] + cont, n, one_by_one)


def runtime_cache(g, state, cont, ctype):
    """The session's tokens prefilled into a cache of ggml type ctype, then
    the continuation as run() feeds it; (logits, bits per value)."""
    tid = {"q8_0": 8, "q4_0": 2}[ctype]
    bits = {"q8_0": 8.5, "q4_0": 4.5}[ctype]
    probe = llama_cpp.Llama(model_path=str(g), n_ctx=N_CTX, n_batch=max(512, STEPS + 1), logits_all=False, verbose=False,
                            flash_attn=True, type_k=tid, type_v=tid)
    raw = Path(state).read_bytes()[:12 + 4 * (TOKENS + 8)]  # "ggsn", version, token count, tokens
    count = int.from_bytes(raw[8:12], "little")
    toks = np.frombuffer(raw[12 : 12 + 4 * count], dtype=np.int32).tolist()
    n = count - 1  # as run(): the last cell is re-fed with the continuation
    probe.eval(toks[:n])
    out = batch_logits(probe, [toks[n]] + cont, n)
    del probe
    return out, bits


def svg(path, rows, floors):
    """Bits per value (x) against KL / floor (y, log), one colour a family."""
    W, H, L, B = 640, 400, 60, 40
    pts = [(name, s, r[0], r[1] / floors[s]) for name, rr in rows.items() for s, r in rr.items()]
    xs = [p[2] for p in pts]
    ys = [np.log10(p[3]) for p in pts]
    x0, x1 = 0, max(xs) * 1.08
    y0, y1 = min(0, min(ys)) - 0.05, max(ys) + 0.1
    X = lambda x: L + (x - x0) / (x1 - x0) * (W - L - 20)
    Y = lambda y: H - B - (np.log10(y) - y0) / (y1 - y0) * (H - B - 20)
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
    fam = {}
    for name, *_ in pts:
        fam.setdefault(name.split("/")[0], colours[len(fam) % len(colours)])
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
           f'font-size="11"><rect width="{W}" height="{H}" fill="white"/>',
           f'<line x1="{L}" y1="{H - B}" x2="{W - 20}" y2="{H - B}" stroke="black"/>',
           f'<line x1="{L}" y1="{H - B}" x2="{L}" y2="20" stroke="black"/>',
           f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle">bits per K/V value</text>',
           f'<text x="14" y="{H / 2}" transform="rotate(-90 14 {H / 2})" text-anchor="middle">'
           f'KL / rounding floor (log)</text>']
    for b in range(0, int(x1) + 1, 2):
        out.append(f'<text x="{X(b):.0f}" y="{H - B + 14}" text-anchor="middle">{b}</text>')
    for v in (1, 1.5, 2, 3, 5, 10, 20):
        if y0 <= np.log10(v) <= y1:
            out.append(f'<line x1="{L}" x2="{W - 20}" y1="{Y(v):.1f}" y2="{Y(v):.1f}" stroke="#ddd"/>'
                       f'<text x="{L - 6}" y="{Y(v) + 4:.1f}" text-anchor="end">{v}</text>')
    for f, col in fam.items():
        for s in floors:
            line = sorted((p[2], p[3]) for p in pts if p[0].split("/")[0] == f and p[1] == s)
            d = " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in line)
            dash = "" if s == list(floors)[0] else ' stroke-dasharray="4 3"'
            out.append(f'<polyline points="{d}" fill="none" stroke="{col}"{dash}/>')
            out += [f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{col}"/>' for x, y in line]
    for i, (f, col) in enumerate(fam.items()):
        out.append(f'<text x="{W - 200}" y="{30 + 14 * i}" fill="{col}">{f}</text>')
    out.append(f'<text x="{W - 200}" y="{30 + 14 * len(fam)}">solid {list(floors)[0]}, dashed '
               f'{" / ".join(list(floors)[1:])}</text></svg>')
    Path(path).write_text("\n".join(out) + "\n")


def rows_from(logs):
    """Rows and floors of earlier runs' markdown tables: {name: {session: (bits, kl, top1, 0, 0)}},
    {session: floor}, [(name, switches)]."""
    rows, floors, settings = {}, {}, []
    for log in logs:
        sessions = []
        for line in Path(log).read_text().splitlines():
            if "floor (one token a call):" in line:
                for part in line.split(":", 1)[1].split(","):
                    sess, val = part.split()
                    floors[sess] = float(val)
                    sessions.append(sess)
            if not line.startswith("| ") or line.startswith("| setting"):
                continue
            cells = [c.strip() for c in line.strip("|").split("|")]
            name, sw = cells[0], cells[1].strip("`")
            per = [c.split(" / ") for c in cells[2:6]]
            rows[name] = {s: (float(per[0][i]), float(per[1][i]), float(per[3][i].rstrip("%")) / 100, 0.0, 0.0)
                          for i, s in enumerate(sessions)}
            settings.append((name, sw))
    return rows, floors, settings


def main():
    if "--rows-from" in OPTS and not ARGS:  # only redraw: no model, no sessions needed
        rows, floors, settings = rows_from(OPTS["--rows-from"].split(","))
        table(rows, floors, settings, list(floors))
        return
    g = MODELS[MODEL]["path"]()
    llm = llama_cpp.Llama(model_path=str(g), n_ctx=N_CTX, n_batch=max(512, STEPS + 1), logits_all=False, verbose=False,
                          flash_attn=True)
    rows = {name: {} for name, _ in SETTINGS}
    floors = {}
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        for sess in SESSIONS:
            state = session_path(sess, TOKENS, MODEL)
            cont = np.load(state.with_suffix(".cont.npy")).tolist()[: STEPS]
            values = MODELS[MODEL]["kv_values"] * TOKENS
            ref = run(llm, state, cont)
            floors[sess] = compare(ref, run(llm, state, cont, one_by_one=True))
            print(f"{sess}: floor KL {floors[sess][0]:.5f} top-1 {floors[sess][1]:.3f}", flush=True)
            for name, sw in SETTINGS:
                if sw.startswith("cache="):
                    logits, bits = runtime_cache(g, state, cont, sw.split("=", 1)[1])
                    kl, top1 = compare(ref, logits)
                    rows[name][sess] = (bits, kl, top1, 0.0, 0.0)
                    print(f"{sess} {name}: {bits:.3f} bits, KL {kl:.5f} ({kl / floors[sess][0]:.2f}x floor), "
                          f"top-1 {top1:.3f}", flush=True)
                    continue
                t0 = time.time()
                subprocess.run([TQ, "encode-kvdump", state, "-q", "-o", d / "x.tqkv", "--model", g, *sw.split()],
                               check=True)
                t1 = time.time()
                subprocess.run([TQ, "decode-kvdump", d / "x.tqkv", "-q", "-o", d / "x.ggsn"], check=True)
                t2 = time.time()
                bits = 8 * (d / "x.tqkv").stat().st_size / values
                kl, top1 = compare(ref, run(llm, d / "x.ggsn", cont))
                rows[name][sess] = (bits, kl, top1, t1 - t0, t2 - t1)
                print(f"{sess} {name}: {bits:.3f} bits, KL {kl:.5f} ({kl / floors[sess][0]:.2f}x floor), "
                      f"top-1 {top1:.3f}, encode {t1 - t0:.2f} s, decode {t2 - t1:.2f} s", flush=True)
    floors = {s: floors[s][0] for s in SESSIONS}
    settings = list(SETTINGS)
    if "--rows-from" in OPTS:
        old, old_floors, old_settings = rows_from(OPTS["--rows-from"].split(","))
        for s in SESSIONS:
            assert abs(old_floors.get(s, floors[s]) - floors[s]) < 1e-5, (s, old_floors, floors)
        rows = {**old, **rows}
        settings = old_settings + settings
    table(rows, floors, settings, SESSIONS)


def table(rows, floors, settings, sessions):
    print(f"\n{MODEL}, {TOKENS} tokens, {STEPS} teacher-forced steps; floor (one token a call): "
          + ", ".join(f"{s} {floors[s]:.5f}" for s in sessions) + "\n")
    print("| setting | switches | bits per K/V value | mean KL | x floor | top-1 |")
    print("|---|---|---|---|---|---|")
    for name, sw in settings:
        r = rows[name]
        f = lambda i, fmt: " / ".join(fmt.format(r[s][i]) for s in sessions)
        xf = " / ".join(f"{r[s][1] / floors[s]:.2f}" for s in sessions)
        print(f"| {name} | `{sw}` | {f(0, '{:.3f}')} | {f(1, '{:.5f}')} | {xf} | {f(2, '{:.1%}')} |")
    if "--svg" in OPTS:
        svg(OPTS["--svg"], rows, floors)


if __name__ == "__main__":
    main()
