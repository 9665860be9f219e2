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
TQ = str(ROOT / "tq")
PIP = {"numpy": "numpy", "gguf": "gguf", "llama_cpp": "llama-cpp-python"}


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


def tq(*args, ok=True):
    """Runs tq; with ok, a failure ends the test with tq's message."""
    p = subprocess.run([TQ, *map(str, args)], capture_output=True, text=True)
    if ok and p.returncode:
        raise SystemExit(f"tq {' '.join(map(str, args))}: {p.stderr}")
    return p
