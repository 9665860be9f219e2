"""tq slot on the other kinds of memory (issue 46), against the real llama-server with tiny
generated models shaped as the released ones (tests/oracle/_tiny_models.py), default flags and
--swa-full: gpt-oss (a sliding window of 16 on alternate layers, sinks) and qwen3next (a hybrid:
gated DeltaNet layers with a recurrent state, every fourth layer attention).

The behaviours of slot_windows.py on each: a prompt that shares 30% or 60% of a stored session
is a miss (exit 3, one line; the server prefills); the stored session itself restores on gpt-oss
(its window padded) and is a miss on qwen3next (llama-server re-processes a prompt that ends
where a recurrent state does); a prompt that extends it restores, the server processes the new
tokens + 1 and continues as closely as the raw restore does; decode-kvdump --tokens refuses a
cut that the caches cannot take.  The server never crashes."""
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FAILED  # noqa: E402
from _server import server_binary, servers_stopped  # noqa: E402
from _tiny_models import build  # noqa: E402
from slot_windows import restores  # noqa: E402

FAMILIES = [  # recipe, tokens of the stored session, the prompts that restore
    ("gpt-oss", 400, ("100%", "extended")),
    ("qwen3next", 400, ("extended",)),
]


def main():
    binary = server_binary()
    with tempfile.TemporaryDirectory() as td:
        for recipe, n_doc, restoring in FAMILIES:
            model = build(recipe, Path(td) / "models")
            for flags, suffix in (((), ""), (("--swa-full",), "_swa_full")):
                tag = recipe.replace("-", "_")
                work = Path(td) / f"{tag}{suffix}"
                work.mkdir()
                restores(model, binary, work, flags, f"_{tag}{suffix}", n_doc,
                         restoring=restoring, forced=False)
        servers_stopped()
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
