"""slot_links.py [--steps=128,512] [--texts=cpp,legal,tables,bulgarian] - what a link costs and
how it restores (a benchmark, not a test): ten notes on a 2,048-token document, each saved by
`tq slot save` as a link appended to the document's snapshot, on SmolLM2 (default flags) and
Gemma 3 270M (default flags and --swa-full), the held-out package texts (tests/oracle/_texts.py)
as the documents.  For notes of about 44 and of 64 tokens: the ten links' bytes over the
document's snapshot (balanced).  For the last 44-token note: mean KL and top-1 over teacher-
forced steps after the link's restore, and after a whole snapshot of the same state, against
the uncompressed restore (the lossless snapshot of that state), beside the floor (the
uncompressed restore fed one token a call).  Writes tests/bench/results/slot_links.md.
TQ_ORACLES/bin/python3 tests/bench/slot_links.py"""
import math
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import ROOT, TQ, gemma, smollm2  # noqa: E402
from _server import Server, server_binary, servers_stopped, top_kl  # noqa: E402
from _texts import names, source_text  # noqa: E402

ARGS = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
STEPS = [int(s) for s in ARGS.get("--steps", "128,512").split(",")]
TEXTS = ARGS.get("--texts", ",".join(names("judge"))).split(",")
DOC = 2048
SIZES = (44, 64)  # the notes' tokens at most
QSIZE = 44  # the notes whose last one's restore is measured


def slot(*args):
    p = subprocess.run([TQ, "slot", *map(str, args)], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"tq slot {args[0]}: {p.stderr.strip()}")
    return p.stderr


def snap_bytes(store):
    return sum(p.stat().st_size for p in (store / "snap").glob("*.tqkv"))


def notes(s, toks, doc_text, n_doc, size):
    """Ten (text, tokens) notes of at most `size` tokens after the document."""
    out = []
    for i in range(10):
        n = size
        while True:
            at = DOC + 200 + 90 * i
            text = f"{doc_text}Note {i}: {s.detokenized([0] + toks[at:at + n]).strip()}"
            nt = s.tokenize(text)
            if len(nt) - n_doc <= size or n < 4:
                break
            n -= 2
        out.append((text, nt))
    return out


def restore(s, d, store, model, text):
    pf = d / "prompt.txt"
    pf.write_text(text)
    s.slot("erase")
    slot("restore", "--server", f"http://127.0.0.1:{s.port}", "--slot-dir", d, "--store", store,
         "--model", model, "--prompt", pf)


def forced(s, prompt, tokens):
    """Top-20 log-probabilities after prompt + tokens[:i], each step one token processed."""
    tops = []
    for i in range(len(tokens)):
        r = s.complete(list(prompt) + list(tokens[:i]), 1)
        if not r["steps"]:  # a piece of a UTF-8 character: the server holds it back
            r = s.complete(list(prompt) + list(tokens[:i]), 4)
        if not r["steps"]:
            raise SystemExit(f"step {i}: no token: {r}")
        tops.append(r["steps"][0][1])
    return tops


def quality(ref, test):
    kl = sum(top_kl(a, b) for a, b in zip(ref, test)) / len(ref)
    top1 = sum(max(a, key=a.get) == max(b, key=b.get) for a, b in zip(ref, test)) / len(ref)
    return kl, top1


def case(label, model, flags, text_name, work):
    rows = {}
    a_dir, b_dir = work / "a", work / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    binary = server_binary()
    with Server(binary, model, a_dir, *flags, ctx=4096) as a, \
            Server(binary, model, b_dir, *flags, ctx=4096) as b:
        toks = a.tokenize(source_text(text_name).decode(errors="replace"))
        doc_text = a.detokenized(toks[:DOC]).rstrip() + "\n"
        doc = a.tokenize(doc_text)
        for size in SIZES:
            store = work / f"links-{size}"
            common = ("--server", f"http://127.0.0.1:{a.port}", "--slot-dir", a_dir,
                      "--model", model)
            a.prefill(doc)
            slot("save", *common, "--store", store)
            doc_bytes = snap_bytes(store)
            ns = notes(a, toks, doc_text, len(doc), size)
            for i, (text, nt) in enumerate(ns):
                a.prefill(nt)
                if size == QSIZE and i == 9:
                    slot("save", *common, "--store", work / "whole")
                    slot("save", *common, "--store", work / "lossless", "--preset", "lossless")
                slot("save", *common, "--store", store)
            added = [len(nt) - len(doc) for _, nt in ns]
            rows[size] = (doc_bytes, snap_bytes(store) - doc_bytes, min(added), max(added))
        text, nt = notes(a, toks, doc_text, len(doc), QSIZE)[9]
        n = max(STEPS)
        more = f"{text}\nQuestion:"
        pt = b.tokenize(more)
        restore(b, b_dir, work / "lossless", model, more)
        gen = b.post("/completion", {"prompt": pt, "n_predict": n, "temperature": 0,
                                     "n_probs": 20, "id_slot": 0, "cache_prompt": True,
                                     "return_tokens": True, "top_k": 1, "ignore_eos": True})
        ref_tokens = gen["tokens"]  # the uncompressed restore's own continuation
        got = {}
        for what, store in (("ref", work / "lossless"), ("link", work / f"links-{QSIZE}"),
                            ("whole", work / "whole")):
            restore(b, b_dir, store, model, more)
            b.complete(pt, 1)
            got[what] = forced(b, pt, ref_tokens)
        # the floor: the generation's own probabilities against the same restore fed one token
        # a call (where the server gives one a token: it holds back pieces of a UTF-8 character)
        gen_tops = [{t["id"]: float(t["logprob"]) for t in p["top_logprobs"]}
                    for p in gen.get("completion_probabilities", [])]
        if len(gen_tops) == len(ref_tokens):
            got["floor"] = gen_tops
    ref = got.pop("ref")
    q = {w: {k: quality(ref[:k], got[w][:k]) for k in STEPS} for w in got}
    return rows, q


def main():
    cases = [("SmolLM2", smollm2(), ()), ("Gemma 3", gemma(), ()),
             ("Gemma 3 --swa-full", gemma(), ("--swa-full",))]
    out = ["# Links: what a note on a stored document costs, and how it restores", "",
           f"`TQ_ORACLES/bin/python3 tests/bench/slot_links.py` (issue 54), llama-server "
           "(tests/setup_server.sh, 2 cores), ctx 4096, default preset (balanced). A 2,048-token "
           "document (each held-out text of tests/oracle/_texts.py) saved by `tq slot save`; "
           "then ten notes on it, the server continuing from the document in its slot, each "
           "saved as a link appended to the document's snapshot.", "",
           "## Store size: the ten links over the document's snapshot", "",
           "| model | text | notes of | document bytes | ten links bytes | ratio |",
           "|---|---|---|---|---|---|"]
    qual = ["", "## Restore quality of the last 44-token note", "",
            "Teacher-forced, one token a call, along the uncompressed restore's own greedy "
            "continuation (the lossless snapshot of the same state restored by `tq slot "
            "restore`): mean KL over the top 20 and top-1 agreement against that restore fed "
            "the same way; the floor is the restore's generation against it fed one token a "
            "call (n/a where the server holds back pieces of a UTF-8 character and gives no "
            "probabilities for them); 'whole' a whole balanced snapshot of the same state.", "",
            "| model | text | steps | floor KL | link KL | whole KL | link / whole | floor top-1 "
            "| link top-1 | whole top-1 |", "|---|---|---|---|---|---|---|---|---|---|"]
    worst = {}
    with tempfile.TemporaryDirectory() as td:
        for label, model, flags in cases:
            for t in TEXTS:
                work = Path(td) / f"{label.replace(' ', '_')}-{t}"
                work.mkdir()
                rows, q = case(label, model, flags, t, work)
                for size, (db, lb, lo, hi) in rows.items():
                    out.append(f"| {label} | {t} | {lo}..{hi} tokens | {db} | {lb} | "
                               f"{lb / db:.2f}x |")
                    w = worst.get((label, size))
                    if not w or lb / db > w[0]:
                        worst[(label, size)] = (lb / db, t)
                for k in STEPS:
                    lk, wh = q["link"][k], q["whole"][k]
                    f = q["floor"][k] if "floor" in q else None
                    fk = f"{f[0]:.2e}" if f else "n/a"
                    f1 = f"{f[1]:.1%}" if f else "n/a"
                    qual.append(f"| {label} | {t} | {k} | {fk} | {lk[0]:.2e} | {wh[0]:.2e} "
                                f"| {lk[0] / wh[0] if wh[0] else math.inf:.2f} | {f1} | "
                                f"{lk[1]:.1%} | {wh[1]:.1%} |")
                print("\n".join(out[-2:] + qual[-len(STEPS):]), flush=True)
        servers_stopped()
    summary = ["", "Worst text per model and note size: " + "; ".join(
        f"{m} {s} tokens {r:.2f}x ({t})" for (m, s), (r, t) in sorted(worst.items()))]
    res = ROOT / "tests" / "bench" / "results" / "slot_links.md"
    res.write_text("\n".join(out + summary + qual) + "\n")
    print(res.read_text())


if __name__ == "__main__":
    main()
