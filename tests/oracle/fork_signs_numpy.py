"""The fork's KV sign vectors are NumPy draws (default_rng(42), 2 x 128
choices of -1/+1).  tq embeds them as bit masks; check those masks against
NumPy itself, and the weight signs against the golden-ratio rule.
Exit 77 (skip) when NumPy is missing."""
import re
import sys
from pathlib import Path

try:
    import numpy as np
except ImportError:
    print("numpy not installed (pip install numpy)")
    sys.exit(77)

src = (Path(__file__).resolve().parents[2] / "lib" / "signs.c").read_text()

def mask(name):
    m = re.search(name + r"\[\d+\] = \{([^}]*)\}", src)
    return [int(v, 16) for v in re.findall(r"0x([0-9a-fA-F]{2})", m.group(1))]

def signs(mask_bytes, n):
    return [-1.0 if (mask_bytes[i // 8] >> (i % 8)) & 1 else 1.0 for i in range(n)]

rng = np.random.default_rng(42)
s1 = rng.choice([-1.0, 1.0], size=128)
s2 = rng.choice([-1.0, 1.0], size=128)
assert signs(mask("tq_fork_s1_mask"), 128) == list(s1), "s1 differs from numpy default_rng(42)"
assert signs(mask("tq_fork_s2_mask"), 128) == list(s2), "s2 differs from numpy default_rng(42)"
w = [-1.0 if ((i * 0x9E3779B9) & 0xFFFFFFFF) >> 31 else 1.0 for i in range(32)]
assert signs(mask("tq_fork_w32_mask"), 32) == w, "weight signs differ from the golden-ratio rule"
print("fork signs match numpy and the golden-ratio rule")
print("ok fork_signs_follow_numpy_and_the_golden_ratio_rule")  # the behaviour, for tests/run.sh (reached only when every check passed)
