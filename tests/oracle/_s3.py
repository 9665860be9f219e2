"""Shared by the object-store tests and benchmark (not a test itself): Ceph's radosgw as
tests/setup_s3.sh brings it up on 127.0.0.1 (and always tears it down, also when the test
fails), requests to it signed by curl's --aws-sigv4 (a client other than tq's), and the fault
proxy tests/s3_proxy.py between tq and the server (it counts the bytes on the wire)."""
import atexit
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from _env import ROOT

SETUP = ROOT / "tests" / "setup_s3.sh"
PROXY = ROOT / "tests" / "s3_proxy.py"


class Store:
    """with Store() as s: s.env (AWS_* for tq), s.curl(...), s.proxy(...)."""

    def __init__(self, netns=None, listen=None):
        """netns: the network namespace the cluster runs in; listen: an address of it radosgw
        answers on too, the endpoint clients get."""
        self.dir = Path(tempfile.mkdtemp(prefix="tq-s3-"))
        self.env = {}
        self.wrap = ["ip", "netns", "exec", netns] if netns else []
        self.listen = listen

    def __enter__(self):
        atexit.register(self.stop)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
        env = dict(os.environ, SETUP_S3_ALSO_LISTEN=self.listen or "")
        p = subprocess.run([*self.wrap, "sh", str(SETUP), "start", str(self.dir / "rgw")],
                           capture_output=True, text=True, env=env)
        if p.returncode:
            self.stop()
            last = p.stdout.strip().splitlines()
            print(last[-1] if last else f"SKIP: tests/setup_s3.sh exited {p.returncode}")
            if p.returncode != 77:
                print(p.stderr[-2000:], file=sys.stderr)
            sys.exit(77)
        for line in p.stdout.splitlines():
            k, _, v = line.partition("=")
            if k.startswith("AWS_"):
                self.env[k] = v
        if self.listen:
            port = self.env["AWS_ENDPOINT_URL"].rsplit(":", 1)[1]
            self.env["AWS_ENDPOINT_URL"] = f"http://{self.listen}:{port}"
        self.endpoint = self.env["AWS_ENDPOINT_URL"]
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self.dir.exists():
            subprocess.run([*self.wrap, "sh", str(SETUP), "stop", str(self.dir / "rgw")],
                           capture_output=True)
            subprocess.run(["rm", "-rf", str(self.dir)])

    def tq_env(self, **over):
        """The environment tq runs in: the store's credentials, endpoint and region."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(self.env)
        env.update({k: str(v) for k, v in over.items()})
        return env

    def curl(self, method, path, *args, endpoint=None, out=None):
        """(HTTP status, body bytes) of one request signed by curl."""
        cmd = ["curl", "-s", "-X", method, "--aws-sigv4", f"aws:amz:{self.env['AWS_REGION']}:s3",
               "--user", f"{self.env['AWS_ACCESS_KEY_ID']}:{self.env['AWS_SECRET_ACCESS_KEY']}",
               "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-w", "\n%{http_code}",
               *map(str, args), f"{endpoint or self.endpoint}/{path}"]
        if out:
            cmd[1:1] = ["-o", str(out)]
        p = subprocess.run(cmd, capture_output=True)
        body, _, code = p.stdout.rpartition(b"\n")
        return int(code or 0), body

    def bucket(self, name):
        code, body = self.curl("PUT", name)
        if code != 200:
            raise SystemExit(f"creating bucket {name}: HTTP {code} {body[:200]!r}")
        return name

    def object_bytes(self, path):
        """The object's bytes, or None when there is none."""
        with tempfile.NamedTemporaryFile() as f:
            code, _ = self.curl("GET", path, out=f.name)
            return Path(f.name).read_bytes() if code == 200 else None

    def put_bytes(self, path, data):
        with tempfile.NamedTemporaryFile() as f:
            Path(f.name).write_bytes(data)
            code, body = self.curl("PUT", path, "-T", f.name)
            if code != 200:
                raise SystemExit(f"PUT {path}: HTTP {code} {body[:200]!r}")

    def keys(self, bucket, prefix=""):
        """The keys of a bucket's objects under prefix (ListObjectsV2: its first 1,000)."""
        code, body = self.curl("GET", f"{bucket}?list-type=2&prefix={quote(prefix, safe='')}")
        if code != 200:
            raise SystemExit(f"listing {bucket}: HTTP {code} {body[:200]!r}")
        return sorted(k.decode() for k in re.findall(rb"<Key>([^<]*)</Key>", body))

    def uploads_in_progress(self, bucket):
        """How many multipart uploads the bucket holds unfinished (ListMultipartUploads)."""
        code, body = self.curl("GET", f"{bucket}?uploads=")
        if code != 200:
            raise SystemExit(f"listing uploads: HTTP {code} {body[:200]!r}")
        return body.count(b"<Upload>")

    def etag(self, path):
        code, body = self.curl("HEAD", path, "-I")
        for line in body.decode(errors="replace").splitlines():
            if line.lower().startswith("etag:"):
                return line.split(":", 1)[1].strip().strip('"')
        return None

    def proxy(self, *flags):
        return Proxy(self.endpoint, *flags)


class Proxy:
    """with store.proxy("--cut-down", 100000) as p: p.endpoint, then p.counts() -> (up, down)."""

    def __init__(self, endpoint, *flags):
        self.to = endpoint.split("//", 1)[1]
        self.flags = [str(f) for f in flags]
        self.dir = Path(tempfile.mkdtemp(prefix="tq-proxy-"))

    def __enter__(self):
        port_file = self.dir / "port"
        self.proc = subprocess.Popen([sys.executable, str(PROXY), "--to", self.to, "--port-file",
                                      str(port_file), "--count-file", str(self.dir / "count"),
                                      *self.flags], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        for _ in range(500):
            if port_file.exists() and port_file.read_text().strip():
                break
            time.sleep(0.01)
        self.endpoint = f"http://127.0.0.1:{port_file.read_text().strip()}"
        return self

    def counts(self):
        """Bytes that went (up, down) through the proxy: it is stopped first, so that every
        connection has closed and been counted."""
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()
        f = self.dir / "count"
        if not f.exists():
            return 0, 0
        vals = dict(line.split() for line in f.read_text().splitlines() if line.strip())
        return int(vals.get("up", 0)), int(vals.get("down", 0))

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()
        subprocess.run(["rm", "-rf", str(self.dir)])
