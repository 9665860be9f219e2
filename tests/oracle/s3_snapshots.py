"""Snapshots in an S3-compatible object store (issue 38), against a real one: Ceph's radosgw
from Debian on 127.0.0.1 (tests/setup_s3.sh, torn down at the end), tq signing with libcurl,
the store's contents checked with curl (a client of its own), and the faults made by
tests/s3_proxy.py between tq and the server, which also counts the bytes on the wire.

- encode to s3:// then decode from it gives the bytes files give (sessions, slot files, NumPy
  dumps; lossless and default), and the object is the snapshot file byte for byte;
- a small snapshot goes up in one PUT, a large one in parts (its ETag names them);
- `decode-kvdump --tokens 1024` of a 7,168-token snapshot fetches at most a fifth of it, and
  inspect the header and index alone;
- pipes and objects together: stdin to an object, an object to stdout;
- every fault ends in one line and exit 1, with no output file, no object (an older object of
  the name unchanged) and no upload left in progress: bad credentials, no such bucket or key,
  the server unreachable, the connection cut mid-upload and mid-download, a corrupted object,
  throttling and 5xx answers; a fault that clears within the retries costs a note, not the job;
- a writer that replaces the object while a decode reads it by ranges fails that decode in
  one line (If-Match), and two writers at once leave one whole snapshot.
"""
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import CACHE, FAILED, FIX, ROOT, TQ, fail, ok  # noqa: E402
from _s3 import Store  # noqa: E402

SEEDS = ROOT / "tests" / "fuzz" / "seeds"
KV_STATE = ROOT / "build" / "tests" / "kv-state"
# the files an object is compared with, made by the plain build: make test runs this script with
# TQ the ASan/UBSan build (tests/run.sh), whose S3 client is what is checked, and whose codec
# then also meets the plain build's bytes
FILE_TQ = str(ROOT / "tq") if (ROOT / "tq").exists() else TQ


def run(env, *args, stdin=None):
    """(exit status, stdout bytes, stderr text) of one tq run."""
    p = subprocess.run([TQ, *map(str, args)], env=env, capture_output=True, stdin=stdin)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def kv_state(path, cells, layers):
    if not KV_STATE.exists():
        subprocess.run(["make", "-s", str(KV_STATE.relative_to(ROOT))], cwd=ROOT,
                       check=True, capture_output=True)
    subprocess.run([KV_STATE, path, str(cells), str(layers)], check=True)
    return path


def one_line_failure(rc, err, needle):
    """Why a fault's ending is not one line naming needle with exit 1 ('' when it is)."""
    lines = err.strip().splitlines()
    if rc != 1:
        return f"exit {rc}: {err.strip()}"
    if len(lines) != 1:
        return f"not one line: {err.strip()}"
    if needle not in lines[0]:
        return f"'{needle}' not in: {lines[0]}"
    return ""


class Case:
    """The store, a bucket, the files every behaviour uses."""

    def __init__(self, store, d):
        self.s, self.d = store, d
        self.env = store.tq_env()
        self.bucket = store.bucket("tqtest")
        self.small = SEEDS / "fuzz_state_read" / "stories16.ggsq"
        self.state = kv_state(d / "8b.ggsn", 3000, 4)  # a Llama-8B-shaped state, 24 chunks
        self.big = kv_state(d / "big.ggsn", 3000, 8)  # lossless: 90 MB, a dozen parts

    def url(self, key):
        return f"s3://{self.bucket}/{key}"

    def file_route(self, src, *enc, dec=()):
        """The snapshot and the decoded bytes through files."""
        snap, out = self.d / "f.tqkv", self.d / "f.out"
        subprocess.run([FILE_TQ, "encode-kvdump", src, "-q", "-o", snap, *enc], check=True)
        subprocess.run([FILE_TQ, "decode-kvdump", snap, "-q", "-o", out, *dec], check=True)
        return snap.read_bytes(), out.read_bytes()


def round_trips(c):
    name = "encode_to_s3_then_decode_gives_the_bytes_files_give"
    sources = [c.small, SEEDS / "fuzz_state_read" / "iswa.ggsn",
               SEEDS / "fuzz_numpy_read" / "per_layer.npz", c.state]
    if (FIX / "p1_f16_vtrans.ggsn").exists():
        sources.append(FIX / "p1_f16_vtrans.ggsn")
    for src in sources:
        for preset in ("lossless", "balanced"):
            snap, dec = c.file_route(src, "--preset", preset)
            key = f"rt/{src.name}.{preset}.tqkv"
            rc, _, err = run(c.env, "encode-kvdump", src, "--preset", preset, "-q", "-o", c.url(key))
            if rc:
                return fail(name, f"{src.name} {preset}: encode: {err.strip()}")
            if c.s.object_bytes(f"{c.bucket}/{key}") != snap:
                return fail(name, f"{src.name} {preset}: the object is not the snapshot file")
            rc, _, err = run(c.env, "decode-kvdump", c.url(key), "-q", "-o", c.d / "s.out")
            if rc or (c.d / "s.out").read_bytes() != dec:
                return fail(name, f"{src.name} {preset}: decode: {err.strip() or 'bytes differ'}")
    ok(name)


def parts(c):
    name = "a_small_snapshot_is_one_put_a_large_one_goes_in_parts"
    rc, _, err = run(c.env, "encode-kvdump", c.small, "-q", "-o", c.url("small.tqkv"))
    tag = c.s.etag(f"{c.bucket}/small.tqkv")
    if rc or not tag or "-" in tag:
        return fail(name, f"small: exit {rc}, ETag {tag}: {err.strip()}")
    rc, _, err = run(c.env, "encode-kvdump", c.big, "--preset", "lossless", "-q", "-o",
                     c.url("big.tqkv"))
    tag = c.s.etag(f"{c.bucket}/big.tqkv")
    if rc or not tag or "-" not in tag or int(tag.rsplit("-", 1)[1]) < 8:
        return fail(name, f"large: exit {rc}, ETag {tag}: {err.strip()}")
    if c.s.uploads_in_progress(c.bucket):
        return fail(name, "uploads left in progress")
    snap, dec = c.file_route(c.big, "--preset", "lossless")
    rc, _, err = run(c.env, "decode-kvdump", c.url("big.tqkv"), "-q", "-o", c.d / "b.out")
    if rc or (c.d / "b.out").read_bytes() != dec:
        return fail(name, f"decode: {err.strip() or 'bytes differ'}")
    ok(name)


def prefix_bytes(c, src, key, model=()):
    """The fraction of the object a --tokens 1024 decode fetched (on the wire), and whether it
    decoded as the file does."""
    _, dec = c.file_route(src, *model, dec=("--tokens", "1024"))
    size = (c.d / "f.tqkv").stat().st_size
    # the upload by the plain build: the ranged decode below is what this checks
    subprocess.run([FILE_TQ, "encode-kvdump", src, *model, "-q", "-o", c.url(key)], env=c.env,
                   check=True)
    with c.s.proxy() as p:
        env = c.s.tq_env(AWS_ENDPOINT_URL=p.endpoint)
        rc, _, err = run(env, "decode-kvdump", c.url(key), "--tokens", "1024", "-q", "-o",
                         c.d / "t.out")
        down = p.counts()[1]
    same = not rc and (c.d / "t.out").read_bytes() == dec
    return down / size, same, err


def prefix(c):
    name = "a_1024_token_prefix_of_7168_fetches_at_most_a_fifth"
    src = kv_state(c.d / "7k.ggsn", 7168, 8)
    frac, same, err = prefix_bytes(c, src, "7k.tqkv")
    if not same or frac > 0.20:
        return fail(name, f"generated state: {frac:.3f} of the object, same bytes {same} {err}")
    print(f"  generated 7,168-cell state: {frac:.3f} of the object fetched", flush=True)
    smol = CACHE.parent / "long" / "smollm2-135m-cpp-7168.ggsn"  # where the benchmarks cached it
    model = CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if smol.exists() and model.exists():
        frac, same, err = prefix_bytes(c, smol, "smol.tqkv", ("--model", model))
        if not same or frac > 0.20:
            return fail(name, f"SmolLM2: {frac:.3f} of the object, same bytes {same} {err}")
        print(f"  SmolLM2's 7,168-token session: {frac:.3f} of the object fetched", flush=True)
    ok(name)


def inspect_index_only(c):
    name = "inspect_reads_the_header_and_index_only"
    run(c.env, "encode-kvdump", c.big, "-q", "-o", c.url("insp.tqkv"))
    subprocess.run([FILE_TQ, "encode-kvdump", c.big, "-q", "-o", c.d / "i.tqkv"], check=True)
    size = (c.d / "i.tqkv").stat().st_size
    want = subprocess.run([TQ, "inspect", c.d / "i.tqkv"], capture_output=True, text=True).stdout
    with c.s.proxy() as p:
        rc, out, err = run(c.s.tq_env(AWS_ENDPOINT_URL=p.endpoint), "inspect", c.url("insp.tqkv"))
        down = p.counts()[1]
    out = out.decode()
    if rc or out.splitlines()[1:] != want.splitlines()[1:]:
        return fail(name, f"exit {rc}: {err.strip()} {out[:300]}")
    if "chunks not read" not in out.splitlines()[0] or down > 0.05 * size + (1 << 20):
        return fail(name, f"{down} bytes of {size} fetched: {out.splitlines()[0]}")
    ok(name)


def pipes_and_objects(c):
    name = "stdin_to_an_object_and_an_object_to_stdout"
    snap, dec = c.file_route(c.state)
    with open(c.state, "rb") as f:
        rc, _, err = run(c.env, "encode-kvdump", "-", "-q", "-o", c.url("pipe.tqkv"), stdin=f)
    if rc or c.s.object_bytes(f"{c.bucket}/pipe.tqkv") != snap:
        return fail(name, f"stdin to an object: {err.strip() or 'bytes differ'}")
    rc, out, err = run(c.env, "decode-kvdump", c.url("pipe.tqkv"), "-q", "-o", "-")
    if rc or out != dec:
        return fail(name, f"an object to stdout: {err.strip() or 'bytes differ'}")
    ok(name)


def expect_fault(c, name, args, needle, env=None, key=None, old=None):
    """A fault's ending: one line naming needle, exit 1, no output file, and the key (if any)
    holding old (None: no object), no upload left in progress.  '' or why not."""
    out = c.d / "fault.out"
    out.unlink(missing_ok=True)
    rc, _, err = run(env or c.env, *args)
    why = one_line_failure(rc, err, needle)
    if not why and out.exists():
        why = "an output file was left"
    if not why and key is not None and c.s.object_bytes(f"{c.bucket}/{key}") != old:
        why = "the object under the key changed" if old else "an object appeared"
    if not why and c.s.uploads_in_progress(c.bucket):
        why = "an upload was left in progress"
    if why:
        fail(name, f"{' '.join(map(str, args))}: {why}")
    return why


def faults_of_requests(c):
    name = "bad_credentials_buckets_keys_and_servers_are_one_line"
    out = c.d / "fault.out"
    run(c.env, "encode-kvdump", c.small, "-q", "-o", c.url("there.tqkv"))
    bad = c.s.tq_env(AWS_SECRET_ACCESS_KEY="wrong")
    dead = c.s.tq_env(AWS_ENDPOINT_URL="http://127.0.0.1:9")
    cases = [
        (["encode-kvdump", c.small, "-q", "-o", c.url("denied.tqkv")], "access denied", bad,
         "denied.tqkv"),
        (["decode-kvdump", c.url("there.tqkv"), "-o", out], "access denied", bad, None),
        (["encode-kvdump", c.small, "-q", "-o", "s3://no-such-bucket/k.tqkv"], "no such bucket",
         None, None),
        (["decode-kvdump", "s3://no-such-bucket/k.tqkv", "-o", out], "no such bucket", None, None),
        (["decode-kvdump", c.url("missing.tqkv"), "-o", out], "no such object", None, None),
        (["inspect", c.url("missing.tqkv")], "no such object", None, None),
        (["encode-kvdump", c.small, "-q", "-o", c.url("dead.tqkv")], "cannot connect", dead,
         "dead.tqkv"),
        (["decode-kvdump", c.url("there.tqkv"), "-o", out], "tried 5 times", dead, None),
    ]
    for args, needle, env, key in cases:
        if expect_fault(c, name, args, needle, env, key):
            return
    env = {k: v for k, v in c.env.items() if k != "AWS_SECRET_ACCESS_KEY"}
    if expect_fault(c, name, ["inspect", c.url("there.tqkv")], "no credentials", env):
        return
    ok(name)


def cut_upload(c):
    name = "a_cut_upload_leaves_the_old_object_and_no_parts"
    old = b"an older object under the same key"
    c.s.put_bytes(f"{c.bucket}/cut.tqkv", old)
    with c.s.proxy("--cut-up", 3 << 20) as p:  # every connection, 3 MB into it
        env = c.s.tq_env(AWS_ENDPOINT_URL=p.endpoint)
        if expect_fault(c, name, ["encode-kvdump", c.big, "--preset", "lossless", "-q", "-o",
                                  c.url("cut.tqkv")], "tried 5 times", env, "cut.tqkv", old):
            return
    snap, _ = c.file_route(c.big, "--preset", "lossless")
    with c.s.proxy("--cut-up", 3 << 20, "--cuts", 1) as p:  # one cut: retried
        env = c.s.tq_env(AWS_ENDPOINT_URL=p.endpoint)
        rc, _, err = run(env, "encode-kvdump", c.big, "--preset", "lossless", "-q", "-o",
                         c.url("cut.tqkv"))
    if rc or c.s.object_bytes(f"{c.bucket}/cut.tqkv") != snap or "retried" not in err:
        return fail(name, f"one cut: exit {rc}: {err.strip()}")
    ok(name)


def cut_download(c):
    name = "a_cut_download_leaves_no_output"
    _, dec = c.file_route(c.big, "--preset", "lossless")
    run(c.env, "encode-kvdump", c.big, "--preset", "lossless", "-q", "-o", c.url("down.tqkv"))
    out = c.d / "fault.out"
    out.write_bytes(b"an older file")
    with c.s.proxy("--cut-down", 2 << 20) as p:
        env = c.s.tq_env(AWS_ENDPOINT_URL=p.endpoint)
        rc, _, err = run(env, "decode-kvdump", c.url("down.tqkv"), "-q", "-o", out)
    why = one_line_failure(rc, err, "tried 5 times")
    if why or out.read_bytes() != b"an older file":
        return fail(name, why or "the older output file changed")
    with c.s.proxy("--cut-down", 8 << 20, "--cuts", 1) as p:
        env = c.s.tq_env(AWS_ENDPOINT_URL=p.endpoint)
        rc, _, err = run(env, "decode-kvdump", c.url("down.tqkv"), "-q", "-o", out)
    if rc or out.read_bytes() != dec or "retried" not in err:
        return fail(name, f"one cut: exit {rc}: {err.strip()}")
    ok(name)


def corrupt(c):
    name = "a_corrupted_or_cut_object_is_refused"
    snap, _ = c.file_route(c.state)
    flip = bytearray(snap)
    flip[len(flip) // 2] ^= 0x10
    c.s.put_bytes(f"{c.bucket}/flip.tqkv", bytes(flip))
    c.s.put_bytes(f"{c.bucket}/short.tqkv", snap[: len(snap) - 100])
    out = c.d / "fault.out"
    # a whole decode streams the object, a token prefix reads it by ranges: both find the fault
    for key, args, needle in (("flip.tqkv", [], "checksum mismatch"),
                              ("short.tqkv", [], "truncated"),
                              ("flip.tqkv", ["--tokens", "3000"], "checksum mismatch"),
                              ("short.tqkv", ["--tokens", "5"], "trailer")):
        if expect_fault(c, name, ["decode-kvdump", c.url(key), *args, "-o", out], needle):
            return
    ok(name)


def throttled(c):
    name = "throttling_and_5xx_are_retried_then_one_line"
    snap, dec = c.file_route(c.state)
    run(c.env, "encode-kvdump", c.state, "-q", "-o", c.url("slow.tqkv"))
    out = c.d / "fault.out"
    for status in (503, 500):
        with c.s.proxy("--status", status, "--fail", 2) as p:
            env = c.s.tq_env(AWS_ENDPOINT_URL=p.endpoint)
            rc, _, err = run(env, "decode-kvdump", c.url("slow.tqkv"), "-q", "-o", out)
            if rc or out.read_bytes() != dec or "retried" not in err:
                return fail(name, f"{status} twice, decode: exit {rc}: {err.strip()}")
        with c.s.proxy("--status", status, "--fail", 2) as p:
            env = c.s.tq_env(AWS_ENDPOINT_URL=p.endpoint)
            rc, _, err = run(env, "encode-kvdump", c.state, "-q", "-o", c.url(f"s{status}.tqkv"))
            if rc or c.s.object_bytes(f"{c.bucket}/s{status}.tqkv") != snap:
                return fail(name, f"{status} twice, encode: exit {rc}: {err.strip()}")
        with c.s.proxy("--status", status, "--fail", 1000) as p:
            env = c.s.tq_env(AWS_ENDPOINT_URL=p.endpoint)
            if expect_fault(c, name, ["decode-kvdump", c.url("slow.tqkv"), "-o", out],
                            f"HTTP {status}", env):
                return
            if expect_fault(c, name, ["encode-kvdump", c.state, "-q", "-o", c.url("never.tqkv")],
                            "tried 5 times", env, "never.tqkv"):
                return
    ok(name)


def racing_writers(c):
    name = "a_racing_writer_costs_one_line_never_a_mixed_object"
    snap_a, _ = c.file_route(c.state)
    snap_b, _ = c.file_route(c.small)
    run(c.env, "encode-kvdump", c.state, "-q", "-o", c.url("race.tqkv"))
    gate = c.d / "gate"
    gate.unlink(missing_ok=True)
    # the reader's first connection reads the header and index; its chunks' (the second) waits
    # while another writer replaces the object
    with c.s.proxy("--gate", gate, "--hold-after", 1) as p:
        env = c.s.tq_env(AWS_ENDPOINT_URL=p.endpoint)
        out = c.d / "fault.out"
        out.unlink(missing_ok=True)
        result = {}
        t = threading.Thread(target=lambda: result.update(
            r=run(env, "decode-kvdump", c.url("race.tqkv"), "--tokens", "1024", "-o", out)))
        t.start()
        for _ in range(1000):
            if Path(f"{gate}.held").exists():
                break
            time.sleep(0.01)
        rc, _, err = run(c.env, "encode-kvdump", c.small, "-q", "-o", c.url("race.tqkv"))
        gate.write_text("")
        t.join()
    rc, _, err = result["r"]
    why = one_line_failure(rc, err, "changed while it was read")
    if why or out.exists():
        return fail(name, why or "an output file was left")
    # two writers at once: the object is one of their snapshots, whole
    jobs = [subprocess.Popen([TQ, "encode-kvdump", src, "-q", "-o", c.url("both.tqkv")],
                             env=c.env, stderr=subprocess.PIPE) for src in (c.state, c.small)]
    if any(j.wait() for j in jobs):
        return fail(name, "a concurrent encode failed")
    if c.s.object_bytes(f"{c.bucket}/both.tqkv") not in (snap_a, snap_b):
        return fail(name, "two writers left an object that is neither snapshot")
    ok(name)


def main():
    with Store() as store, tempfile.TemporaryDirectory() as td:
        c = Case(store, Path(td))
        for behaviour in (round_trips, parts, prefix, inspect_index_only, pipes_and_objects,
                          faults_of_requests, cut_upload, cut_download, corrupt, throttled,
                          racing_writers):
            behaviour(c)
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
