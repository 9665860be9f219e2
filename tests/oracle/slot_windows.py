"""tq slot on a sliding-window model (issue 46), against the real llama-server with Gemma 3
270M (iSWA: a window of 512 on five layers of six), default flags and --swa-full.

llama.cpp's sequence save keeps only the sliding-window cache's last window, so a stored
session restores whole or not at all (until checkpoints say otherwise):
- a prompt sharing 30% or 60% of a stored session is a miss: exit 3, one line, and the server
  prefills the whole prompt (never a cut that leaves the window empty: that crashed the server);
- a prompt that is the session, or extends it, restores: the server processes at most the
  tokens after the restored point + 1 (also without --swa-full: tq writes two masked cells
  below the window, which llama-server's check asks for) and continues as closely as the
  raw restore does (mean KL over the top 20 against a fresh prefill of the same prompt,
  teacher-forced along its greedy tokens), with the lossless and the default preset;
- decode-kvdump --tokens of a count whose window the snapshot does not hold: one line, exit 1,
  no file.
Chains of notes on a document (links over a moved window): tests/oracle/slot_links.py.
The raw restore (the server's own slot file into a server that uses it, --swa-full) sets how
closely a restore can continue.  Every server is stopped at the end, also on failure."""
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FAILED, ROOT, TQ, fail, gemma, ok  # noqa: E402
from _server import (Server, agreement, forced_kl, forced_tops, server_binary,  # noqa: E402
                     servers_stopped)

TEXT = "\n\n".join(p.read_text() for p in sorted((ROOT / "tests" / "oracle" / "prompts").glob("*.txt")))
STEPS = 16
DOC_TOKENS = 1100  # past the window of 512, and past the default SWA cache of 1,024 cells


def slot(*args):
    p = subprocess.run([TQ, "slot", *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stderr.strip()


def prompts(s, doc_text, doc, toks, n_doc):
    """(label, text) of prompts sharing 30%, 60%, 100% of doc's tokens (the document's text for
    100%: a tokenizer that adds a space in front tokenizes a detokenized text otherwise), and one
    extending it."""
    out = []
    for pct in (30, 60):
        out.append((f"{pct}%", s.detokenized(doc[:len(doc) * pct // 100])))
    out.append(("100%", doc_text))
    more = s.detokenized([0] + toks[n_doc + 40:n_doc + 90]).strip()
    out.append(("extended", f"{doc_text} {more}"))
    return out


def kl_after(server, pt, ref, forced, most=1):
    """Mean KL over the top 20 against ref (a fresh prefill's greedy steps) of the server's
    continuation of pt: teacher-forced along ref's tokens, or (forced False: the tiny models,
    a token of whose text is part of a character, which the server gives no probabilities for
    alone) along its own greedy steps to the first divergence."""
    if forced:
        return forced_kl([top for _, top in ref],
                         forced_tops(server, pt, [tok for tok, _ in ref], most=most))
    return agreement(ref, server.complete(pt, STEPS)["steps"])[1]


def restores(model, binary, work, flags, suffix, n_doc=DOC_TOKENS,
             restoring=("100%", "extended"), forced=True):
    """Every prompt against a stored session of n_doc tokens, both presets: the prompts in
    restoring restore, the others are misses."""
    a_dir, b_dir, c_dir, r_dir = work / "a", work / "b", work / "c", work / "r"
    for d in (a_dir, b_dir, c_dir, r_dir):
        d.mkdir()
    with Server(binary, model, a_dir, *flags) as a, Server(binary, model, b_dir, *flags) as b, \
            Server(binary, model, c_dir, *flags) as c, \
            Server(binary, model, r_dir, "--swa-full") as r:
        toks = a.tokenize(TEXT)
        doc_text = a.detokenized(toks[:n_doc]).strip() + "."
        doc = a.tokenize(doc_text)
        a.prefill(doc)
        a.slot("save", "raw.bin")  # the server's own slot file: the raw lossless restore
        (r_dir / "raw.bin").write_bytes((a_dir / "raw.bin").read_bytes())
        (a_dir / "raw.bin").unlink()
        refs = {}  # label: (text, tokens, a fresh prefill's greedy steps or None for a miss)
        raw = {}  # how closely the raw restore (into a server that uses it) continues
        for label, text in prompts(a, doc_text, doc, toks, n_doc):
            pt = c.tokenize(text)
            ref = None
            if label in restoring:
                c.slot("erase")
                ref = c.complete(pt, STEPS)["steps"]
                r.slot("erase")
                r.slot("restore", "raw.bin")
                r.prefill(pt)  # the prompt past the restored document
                raw[label] = kl_after(r, pt, ref, forced)
            refs[label] = (text, pt, ref)
        for preset in ("lossless", "balanced"):
            store = work / f"store-{preset}"
            a.prefill(doc)
            rc, err = slot("save", "--server", f"http://127.0.0.1:{a.port}", "--slot-dir", a_dir,
                           "--store", store, "--model", model, "--preset", preset)
            if rc:
                fail(f"save_{preset}{suffix}", f"exit {rc}: {err}")
                continue
            for label, (text, pt, ref) in refs.items():
                name = f"restore_{label.rstrip('%')}_{preset}{suffix}"
                pf = work / "prompt.txt"
                pf.write_text(text)
                b.slot("erase")
                rc, err = slot("restore", "--server", f"http://127.0.0.1:{b.port}", "--slot-dir",
                               b_dir, "--store", store, "--model", model, "--prompt", pf)
                first = b.complete(pt, 1)
                whole = label in restoring
                left = [p.name for p in b_dir.iterdir()]
                if rc == 3 and not whole and first["processed"] == len(pt) and \
                        len(err.splitlines()) == 1 and "miss" in err and not left:
                    ok(name + "_is_a_miss")
                    continue
                kl = float("inf")
                if rc == 0 and whole:
                    # (on the ring the server goes back two cells once: measured at the third
                    # step after a restore, the cells before it the restored ones)
                    kl = kl_after(b, pt, ref, forced, most=1 if flags else 3)
                # lossless continues as closely as the raw restore does; the default preset
                # within its quantization beside it
                # (the ring's lossless restore and its floor take two paths, a ring that goes
                # back two cells once and a --swa-full server: their numerics part by up to
                # about 1e-2, measured 5.5e-3 and 8.9e-3 against floors of 8.9e-4 and 8.5e-3)
                raw_kl = raw.get(label, 0.0)
                slack = 0.05
                if preset == "lossless":
                    slack = 1e-3 if flags else 1e-2
                good_kl = kl <= 2 * raw_kl + slack
                if rc != 0 or not whole or first["processed"] > len(pt) - len(doc) + 1 or \
                        not good_kl or left:
                    fail(name, f"exit {rc} ({err}); processed {first['processed']} of {len(pt)} "
                               f"(the document {len(doc)}); KL {kl:.2e} over {STEPS} "
                               f"teacher-forced steps (the raw restore: {raw_kl:.2e}); left in "
                               f"--slot-dir {left}")
                else:
                    print(f"  {name}: KL {kl:.1e} (the raw restore {raw_kl:.1e}), processed "
                          f"{first['processed']} of {len(pt)}")
                    ok(f"{name}_continues_as_the_raw_restore")
        # a cut whose window is not held: refused
        name = "decode_tokens_refuses_a_cut_without_its_window" + suffix
        snap = next((work / "store-lossless" / "snap").glob("*.tqkv"))
        out = work / "cut.ggsq"
        p = subprocess.run([TQ, "decode-kvdump", str(snap), "--tokens", str(len(doc) // 2), "-o",
                            str(out)], capture_output=True, text=True)
        err = p.stderr.strip()
        said = "window" in err or "recurrent state" in err
        if p.returncode != 1 or len(err.splitlines()) != 1 or not said or out.exists():
            fail(name, f"exit {p.returncode}: {err}; file written {out.exists()}")
        else:
            ok(name)
        for s in (a, b, c, r):
            if s.proc.poll() is not None:
                fail("the_server_never_crashes" + suffix, s.log_tail())


def main():
    binary = server_binary()
    model = gemma()
    with tempfile.TemporaryDirectory() as td:
        for flags, suffix in (((), ""), (("--swa-full",), "_swa_full")):
            work = Path(td) / (suffix or "default")
            work.mkdir()
            restores(model, binary, work, flags, suffix)
        servers_stopped()
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
