"""S3 as clouds behave (issue 56): tq's requests against radosgw (tests/setup_s3.sh) through the
fault proxy tests/s3_proxy.py, which answers as a busy or a faraway store does.

- 503 SlowDown with Retry-After: the waits are what the store asks, then the request goes;
- 503 without it: the waits are random below a cap that doubles (full jitter), so clients that
  failed together do not retry together;
- RequestTimeTooSkewed with the store's Date 10 minutes ahead: tq dates its requests by the
  store's clock from then on (one line says so) and the upload completes; the machine's clock
  is untouched;
- an answer that stalls after its head: given up after TQ_S3_STALL_S without a byte, retried,
  the decode complete;
- a throttled store: slower, the same bytes;
- a bucket that vanished: one line naming it, exit 1, for a decode, `tq slot ls` and
  `tq slot check`, and nothing retried."""
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FAILED, ROOT, TQ, fail, ok  # noqa: E402
from _s3 import Store  # noqa: E402

KV_STATE = ROOT / "build" / "tests" / "kv-state"


def run(env, *args):
    t0 = time.time()
    p = subprocess.run([TQ, *map(str, args)], env=env, capture_output=True)
    return p.returncode, p.stderr.decode(errors="replace").strip(), time.time() - t0


def waits(err):
    """The waits a retried request told, in seconds."""
    m = re.search(r"\(waits:([\d. ]+) s\)", err)
    return [float(w) for w in m.group(1).split()] if m else []


def main():
    with tempfile.TemporaryDirectory() as td, Store() as s3:
        d = Path(td)
        if not KV_STATE.exists():
            subprocess.run(["make", "-s", str(KV_STATE.relative_to(ROOT))], cwd=ROOT,
                           check=True, capture_output=True)
        state = d / "state.bin"
        subprocess.run([KV_STATE, state, "2048", "4"], check=True)
        env = s3.tq_env()
        s3.bucket("clouds")
        url = "s3://clouds/s.tqkv"
        rc, err, _ = run(env, "encode-kvdump", state, "-q", "-o", url, "--preset", "lossless")
        assert rc == 0, err
        out = d / "out.bin"

        name = "slowdown_with_retry_after_waits_what_the_store_asks"
        with s3.proxy("--status", 503, "--fail", 2, "--retry-after", 1) as p:
            rc, err, took = run(s3.tq_env(AWS_ENDPOINT_URL=p.endpoint), "decode-kvdump", url,
                                "-q", "-o", out)
        if rc or out.read_bytes() != state.read_bytes() or waits(err) != [1.0, 1.0] or took < 2:
            fail(name, f"exit {rc} in {took:.2f} s, waits {waits(err)}: {err}")
        else:
            ok(name)

        name = "backoff_waits_are_random_below_a_doubling_cap"
        seen = []
        for _ in range(2):
            with s3.proxy("--status", 503, "--fail", 3) as p:
                rc, err, _ = run(s3.tq_env(AWS_ENDPOINT_URL=p.endpoint), "decode-kvdump", url,
                                 "-q", "-o", out)
            seen.append((rc, waits(err), err))
        caps = [0.2, 0.4, 0.8]
        good = all(rc == 0 and len(w) == 3 and all(x <= c for x, c in zip(w, caps))
                   for rc, w, _ in seen)
        if not good or seen[0][1] == seen[1][1]:
            fail(name, f"{[(rc, w) for rc, w, _ in seen]}: {seen[0][2]}")
        else:
            ok(name)

        name = "a_skewed_clock_is_corrected_from_the_stores_date"
        dates = d / "dates"
        with s3.proxy("--status", 403, "--fail", 1, "--skew", 600, "--dates", dates) as p:
            rc, err, _ = run(s3.tq_env(AWS_ENDPOINT_URL=p.endpoint), "encode-kvdump", state,
                             "-q", "-o", "s3://clouds/skewed.tqkv", "--preset", "lossless")
        sent = dates.read_text().split() if dates.exists() else []
        ahead = [time.mktime(time.strptime(t, "%Y%m%dT%H%M%SZ")) - time.mktime(time.gmtime())
                 for t in sent]
        m = re.search(r"differs from the store's by \+(\d+) s", err)
        if rc or not m or abs(int(m.group(1)) - 600) > 5 or not ahead or \
                not all(540 < a < 660 for a in ahead) or \
                s3.object_bytes("clouds/skewed.tqkv") is None:
            fail(name, f"exit {rc}: {err}; requests dated {[round(a) for a in ahead]} s ahead")
        else:
            ok(name)

        name = "a_stalled_answer_is_given_up_and_retried"
        with s3.proxy("--stall", 8, "--stalls", 1) as p:
            rc, err, took = run(s3.tq_env(AWS_ENDPOINT_URL=p.endpoint, TQ_S3_STALL_S=1),
                                "decode-kvdump", url, "-q", "-o", out)
        if rc or out.read_bytes() != state.read_bytes() or "retried" not in err or took > 5.5:
            fail(name, f"exit {rc} in {took:.2f} s: {err}")
        else:
            ok(name)

        name = "a_throttled_store_is_slower_and_the_same"
        with s3.proxy("--throttle", 2_000_000) as p:
            rc, err, took = run(s3.tq_env(AWS_ENDPOINT_URL=p.endpoint), "decode-kvdump", url,
                                "-q", "-o", out)
        if rc or out.read_bytes() != state.read_bytes():
            fail(name, f"exit {rc} in {took:.2f} s: {err}")
        else:
            ok(name)

        name = "a_vanished_bucket_is_one_line_and_not_retried"
        s3.bucket("vanishing")
        run(env, "encode-kvdump", state, "-q", "-o", "s3://vanishing/s.tqkv")
        s3.curl("DELETE", "vanishing/s.tqkv")
        code, _ = s3.curl("DELETE", "vanishing")
        said = [run(env, "decode-kvdump", "s3://vanishing/s.tqkv", "-o", out),
                run(env, "slot", "ls", "s3://vanishing/store"),
                run(env, "slot", "check", "s3://vanishing/store")]
        bad = [(rc, e) for rc, e, _ in said
               if rc != 1 or len(e.splitlines()) != 1 or "no such bucket" not in e or
               "tried" in e]
        if code != 204 or bad:
            fail(name, f"bucket delete HTTP {code}; {bad}")
        else:
            ok(name)
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
