"""llama.cpp (PyPI llama-cpp-python) loads a tq-written copy of stories260K
whose bytes differ from the original (alignment 64 and an extra tq.* key) and
computes the same logits on the shared prompt.  Exit 77 = oracle or model
missing."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import numpy as np
    import llama_cpp
except ImportError as e:
    print(f"{e.name} not installed (pip install llama-cpp-python numpy)")
    sys.exit(77)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import LLAMA_THREADS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("TQ_SHARED") or ROOT.parent / "shared")
MODEL = SHARED / "models" / "stories260K.gguf"
PROMPT = SHARED / "fixtures" / "llama-state" / "prompt1.txt"
STANDIN = not MODEL.exists()  # a user's checkout: stories260K's shapes, random weights
if STANDIN:
    try:
        import gguf  # noqa: F401  (the stand-in's writer)
    except ImportError:
        print("../shared/models/stories260K.gguf not found, and gguf for a stand-in is not installed")
        sys.exit(77)


def logits(path, tokens):
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=512, n_batch=512, logits_all=True, verbose=False, seed=1, **LLAMA_THREADS)
    llm.eval(tokens)
    out = np.array(llm.scores[: len(tokens)], dtype=np.float32)
    del llm
    return out


with tempfile.TemporaryDirectory() as d:
    if STANDIN:
        MODEL = Path(d) / "standin.gguf"
        subprocess.run([sys.executable, str(ROOT / "tests" / "tools" / "standin_model.py"), str(MODEL)], check=True)
    copy = Path(d) / "stories_tq.gguf"
    subprocess.run([str(ROOT / "build" / "tests" / "gguf-rewrite"), str(MODEL), str(copy), "align=64", "tag"], check=True)
    assert copy.read_bytes() != MODEL.read_bytes(), "the copy should differ in bytes"
    probe = llama_cpp.Llama(model_path=str(MODEL), n_ctx=512, vocab_only=True, verbose=False)
    text = PROMPT.read_text() if PROMPT.exists() else "Once upon a time, there was a little girl."
    tokens = probe.tokenize(text.encode())[:300]
    del probe
    a = logits(MODEL, tokens)
    b = logits(copy, tokens)
    assert a.shape == b.shape and a.shape[0] == len(tokens)
    assert np.array_equal(a, b), f"logits differ: max abs {np.abs(a - b).max()}"
    # a split copy (5 shards) loads from its first shard with the same result
    subprocess.run([str(ROOT / "build" / "tests" / "gguf-rewrite"), str(MODEL), str(Path(d) / "sp.gguf"),
                    "split=300000"], check=True)
    c = logits(Path(d) / "sp-00001-of-00005.gguf", tokens)
    assert np.array_equal(a, c), "split copy logits differ"
    print(f"identical logits over {len(tokens)} positions")
print("ok llama_cpp_loads_rewritten_models_with_identical_logits")  # the behaviour, for tests/run.sh (reached only when every check passed)
