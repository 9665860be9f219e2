"""standin_model.py OUT.gguf - a llama model with stories260K's shapes
(5 layers, 64 wide, 8 query and 4 KV heads of 8, FFN 172, a 512-token
SentencePiece vocabulary) and random weights, for the tests that use
stories260K when ../shared is absent (a user's checkout).  The plans and
layouts the tests check depend on the shapes alone; random weights choose
no default.  Needs numpy and gguf (the oracle environment)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "oracle"))
from _models import make_model  # noqa: E402

make_model(sys.argv[1], None, head_dim=8, n_head=8, n_head_kv=4, n_layer=5, n_embd=64, n_ff=172,
           gains=True, seed=260, stories_order=True)
