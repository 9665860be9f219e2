"""slot_store.py [--reps=3] - `tq slot save` / `restore` (a benchmark, not a test) against what a
user would do instead: the server's own save and restore of the raw slot file, plus moving that
file to the same store (a copy into the store's directory; `curl --aws-sigv4 -T` / `-o` for
radosgw). SmolLM2-135M in llama-server (tests/setup_server.sh) at 2,048 and 8,192 tokens;
stores in a temporary directory and on radosgw (tests/setup_s3.sh). Medians of interleaved runs.
TQ_ORACLES/bin/python3 tests/bench/slot_store.py --reps=3"""
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _timing import timed_call as timed, tq_slot  # noqa: E402
from _env import ROOT, TQ, smollm2  # noqa: E402
from _s3 import Store  # noqa: E402
from _server import Server, server_binary  # noqa: E402

ARGS = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
REPS = int(ARGS.get("--reps", 3))
TEXT = "\n\n".join(p.read_text() for p in sorted((ROOT / "tests" / "oracle" / "prompts").glob("*.txt")))
TEXT += "\n\n" + "\n\n".join(p.read_text() for p in sorted((ROOT / "tests" / "bench" / "prompts").glob("*")))


def measure(s, slots, work, model, tokens, where, env, s3):
    """Medians (raw save + move, tq slot save, raw move + restore, tq slot restore), sizes."""
    prompt = s.tokenize(TEXT)[:tokens]
    text = s.post("/detokenize", {"tokens": prompt[1:]})["content"]
    pf = work / f"prompt-{tokens}.txt"
    pf.write_text(text)
    prompt = s.tokenize(text)
    s.slot("erase")
    s.post("/completion", {"prompt": prompt, "n_predict": 0, "id_slot": 0, "cache_prompt": True})
    server = f"http://127.0.0.1:{s.port}"
    store = where(f"s{tokens}")
    raw_key = f"raw-{tokens}.bin"
    raw_size = []

    def raw_save():
        s.slot("save", raw_key)
        raw_size.append((slots / raw_key).stat().st_size)
        if s3:
            subprocess.run(s3.curl_args("-T", slots / raw_key, f"{s3.endpoint}/bench/{raw_key}"),
                           check=True, capture_output=True)
        else:
            shutil.copyfile(slots / raw_key, Path(store) / raw_key)
        (slots / raw_key).unlink()

    def raw_restore():
        if s3:
            subprocess.run(s3.curl_args("-o", slots / raw_key, f"{s3.endpoint}/bench/{raw_key}"),
                           check=True, capture_output=True)
        else:
            shutil.copyfile(Path(store) / raw_key, slots / raw_key)
        s.slot("restore", raw_key)
        (slots / raw_key).unlink()

    t = {"raw save": [], "tq save": [], "raw restore": [], "tq restore": []}
    if not s3:
        Path(store).mkdir(exist_ok=True)
    for rep in range(REPS):
        # a store of its own each time: a second save of the same tokens would find them stored
        common = ["--server", server, "--slot-dir", slots, "--store", where(f"s{tokens}-{rep}"),
                  "--model", model]
        t["raw save"].append(timed(raw_save))
        t["tq save"].append(timed(lambda: tq_slot(TQ, env, "save", *common)))
        t["raw restore"].append(timed(raw_restore))
        t["tq restore"].append(timed(lambda: tq_slot(TQ, env, "restore", *common, "--prompt", pf)))
    store = where(f"s{tokens}-0")
    listing = subprocess.run([TQ, "slot", "ls", store, "--json"], capture_output=True, text=True,
                             env=env).stdout
    snap = max(e["bytes"] for e in json.loads(listing))
    return {k: statistics.median(v) for k, v in t.items()}, snap, raw_size[0], len(prompt)


def main():
    binary = server_binary()
    model = smollm2()
    print("| store | prompt tokens | raw slot MB | snapshot MB | raw save + move s | tq slot save s "
          "| ratio | move + raw restore s | tq slot restore s | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as td, Store() as s3:
        work = Path(td)
        slots = work / "slots"
        slots.mkdir()
        s3.bucket("bench")
        s3.curl_args = lambda *a: ["curl", "-sf", "--aws-sigv4",
                                   f"aws:amz:{s3.env['AWS_REGION']}:s3", "--user",
                                   f"{s3.env['AWS_ACCESS_KEY_ID']}:{s3.env['AWS_SECRET_ACCESS_KEY']}",
                                   "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", *map(str, a)]
        with Server(binary, model, slots, ctx=8448) as s:
            for kind, where, env, obj in (("directory", lambda n: str(work / n), None, None),
                                          ("radosgw", lambda n: f"s3://bench/{n}", s3.tq_env(), s3)):
                for tokens in (2048, 8192):
                    m, snap, raw, n = measure(s, slots, work, model, tokens, where, env, obj)
                    print(f"| {kind} | {n} | {raw / 1e6:.1f} | {snap / 1e6:.2f} | {m['raw save']:.2f} | "
                          f"{m['tq save']:.2f} | {m['tq save'] / m['raw save']:.2f} | "
                          f"{m['raw restore']:.2f} | {m['tq restore']:.2f} | "
                          f"{m['tq restore'] / m['raw restore']:.2f} |", flush=True)
    print(f"\nmedians of {REPS} interleaved runs; SmolLM2-135M Q4_1, llama-server from "
          "tests/setup_server.sh, 2 cores; ratio < 1: tq is faster")


if __name__ == "__main__":
    main()
