"""npz_close.py A.npz B.npz MAX [MIN] - exits 0 when every K/V array of B is within MAX of
A's, as its squared error over A's energy, and above MIN (a lossy decode that changed
nothing would be a bug too); else says which array and its error.  The CLI tests' one
comparison of two NumPy dumps of the same state."""
import sys

import numpy as np

a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
most = float(sys.argv[3])
least = float(sys.argv[4]) if len(sys.argv) > 4 else -1.0
for k in a.files:
    if k == "tokens":
        continue
    x, y = a[k].astype(np.float64), b[k].astype(np.float64)
    e = ((x - y) ** 2).sum() / (x ** 2).sum()
    if not least < e < most:
        sys.exit(f"{k}: relative squared error {e:.4g}, not in ({least:g}, {most:g})")
