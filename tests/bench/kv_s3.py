"""kv_s3.py [--reps=5] [--large] - snapshots in an S3-compatible store (a benchmark, not a test),
against Ceph's radosgw on 127.0.0.1 (tests/setup_s3.sh): what a user would do instead is move
the raw state with `curl --aws-sigv4` (-T to upload, -o to download).

For SmolLM2-135M's 7,168-token session (tests/bench/long_sessions.py; with --model) and a
Llama-8B-shaped state (build/tests/kv-state, 2,479 cells of 32 layers, as kv_vs_zstd.py):
- `tq encode-kvdump STATE -o s3://...` against `curl -T STATE`;
- `tq decode-kvdump s3://... -o STATE` against `curl -o STATE` (both write the state);
- the bytes a `--tokens 1024` decode fetches, counted on the wire by tests/s3_proxy.py;
- each tq run's peak anonymous memory (RssAnon sampled every 5 ms).
Medians of interleaved runs.  --large adds a state over 4 GiB (33,000 cells of 32 layers):
encoded to the store and decoded from it, its decoded bytes' hash against the route through
files, and the peak anonymous memory of both tq runs.
TQ_ORACLES/bin/python3 tests/bench/kv_s3.py --reps=5 [--large]"""
import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import ROOT, TQ  # noqa: E402
from _timing import run_peak  # noqa: E402
from _s3 import Store  # noqa: E402

ARGS = dict(a.split("=", 1) if "=" in a else (a, "1") for a in sys.argv[1:])
REPS = int(ARGS.get("--reps", 5))
KV_STATE = ROOT / "build" / "tests" / "kv-state"
LONG = Path.home() / ".cache" / "tq" / "long"
MODELS = Path.home() / ".cache" / "tq" / "models"


def curl(store, *args):
    e = store.env
    return ["curl", "-sf", "--aws-sigv4", f"aws:amz:{e['AWS_REGION']}:s3", "--user",
            f"{e['AWS_ACCESS_KEY_ID']}:{e['AWS_SECRET_ACCESS_KEY']}", "-H",
            "x-amz-content-sha256: UNSIGNED-PAYLOAD", *args]


def states(d):
    out = []
    smol = LONG / "smollm2-135m-cpp-7168.ggsn"
    model = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if smol.exists() and model.exists():
        out.append(("SmolLM2-135M, 7,168 tokens", smol, ["--model", model]))
    else:
        print(f"({smol.name} not cached: run tests/bench/long_sessions.py first)")
    llama = d / "llama8b.ggsn"
    subprocess.run([KV_STATE, llama, "2479", "32"], check=True)
    out.append(("Llama-8B-shaped, 2,479 cells", llama, []))
    return out


def measure(store, bucket, d, name, state, model):
    env = store.tq_env()
    url = f"s3://{bucket}/bench.tqkv"
    raw = f"{store.endpoint}/{bucket}/raw.ggsn"
    cmds = {
        "enc": [TQ, "encode-kvdump", state, *model, "-q", "-o", url],
        "up": curl(store, "-T", state, raw),
        "dec": [TQ, "decode-kvdump", url, "-q", "-o", d / "dec.ggsn"],
        "down": curl(store, "-o", d / "down.ggsn", raw),
    }
    t = {k: [] for k in cmds}
    mem = {"enc": 0.0, "dec": 0.0}
    order = list(cmds.items())
    for rep in range(REPS):  # each command in turn first: none always runs after an upload
        for k, cmd in order[rep % 4:] + order[:rep % 4]:
            wall, peak = run_peak(cmd, env)
            t[k].append(wall)
            if k in mem:
                mem[k] = max(mem[k], peak)
    m = {k: statistics.median(v) for k, v in t.items()}
    snap = store.object_bytes(f"{bucket}/bench.tqkv")
    with store.proxy() as p:
        run_peak([TQ, "decode-kvdump", url, "--tokens", "1024", "-q", "-o", d / "t.ggsn"],
            store.tq_env(AWS_ENDPOINT_URL=p.endpoint))
        down = p.counts()[1]
    size = state.stat().st_size
    print(f"| {name} | {size / 1e6:.0f} / {len(snap) / 1e6:.1f} | {m['enc']:.2f} | {m['up']:.2f} | "
          f"{m['enc'] / m['up']:.2f} | {m['dec']:.2f} | {m['down']:.2f} | "
          f"{m['dec'] / m['down']:.2f} | {down / 1e6:.2f} ({down / len(snap):.3f}) | "
          f"{mem['enc']:.0f} / {mem['dec']:.0f} |", flush=True)


def sha_of(cmd, env):
    """The sha256 of a command's stdout and its peak anonymous memory (MB)."""
    h = hashlib.sha256()
    with tempfile.TemporaryFile() as f:
        _, peak = run_peak(cmd, env, stdout=f)
        f.seek(0)
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest(), peak


def large(store, bucket, d):
    state = d / "large.ggsn"
    subprocess.run([KV_STATE, state, "33000", "32"], check=True)
    env = store.tq_env()
    url = f"s3://{bucket}/large.tqkv"
    t0 = time.perf_counter()
    _, enc_peak = run_peak([TQ, "encode-kvdump", state, "-q", "-o", url], env)
    enc_s = time.perf_counter() - t0
    # the decoded state goes to a file of its own (4 GiB); only hashes are compared
    t0 = time.perf_counter()
    _, dec_peak = run_peak([TQ, "decode-kvdump", url, "-q", "-o", d / "large.out"], env)
    dec_s = time.perf_counter() - t0
    got = hashlib.sha256()
    with open(d / "large.out", "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            got.update(block)
    (d / "large.out").unlink()
    run_peak([TQ, "encode-kvdump", state, "-q", "-o", d / "large.tqkv"], env)
    want, _ = sha_of([TQ, "decode-kvdump", d / "large.tqkv", "-q", "-o", "-"], env)
    same = got.hexdigest() == want
    print(f"\nA state over 4 GiB ({state.stat().st_size / 2**30:.2f} GiB, 33,000 cells of 32 layers): "
          f"encoded to the store in {enc_s:.1f} s at peak anonymous memory {enc_peak:.0f} MB, "
          f"decoded from it in {dec_s:.1f} s at {dec_peak:.0f} MB; the decoded bytes "
          f"{'equal' if same else 'DIFFER FROM'} those through files (sha256).")
    if not same or enc_peak >= 256 or dec_peak >= 256:
        raise SystemExit("the large state's round trip failed its bounds")


def main():
    if not KV_STATE.exists():
        subprocess.run(["make", "-s", "build/tests/kv-state"], cwd=ROOT, check=True)
    with Store() as store, tempfile.TemporaryDirectory() as td:
        d = Path(td)
        bucket = store.bucket("bench")
        print("| state | raw / snapshot MB | tq encode -> s3 s | curl -T raw s | ratio | "
              "tq decode <- s3 s | curl -o raw s | ratio | --tokens 1024 fetched MB (of object) | "
              "peak anon MB encode / decode |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name, state, model in states(d):
            measure(store, bucket, d, name, state, model)
        print(f"\nmedians of {REPS} interleaved runs against radosgw (memstore) on 127.0.0.1; "
              "ratio < 1: tq is faster")
        if "--large" in ARGS:
            large(store, bucket, d)


if __name__ == "__main__":
    main()
