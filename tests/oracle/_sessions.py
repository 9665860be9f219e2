"""Generated llama.cpp session files (not a test itself): one KV cache of
`layers` f16 K and V tensors of `cells` rows of `width` values, sequence 0.
Used by the benchmarks (a 325 MB session) and by tests that need K of a known
shape."""
import numpy as np


def write_session(path, layers, width, cells, outlier_channels=0, seed=0, positions=None, k_rows=None, arch="llama"):
    """outlier_channels: that many channels of every K/V row 8x larger, as
    real K caches have.  positions: each cell's position (default 0..cells-1).
    k_rows(layer, c0, n): K rows [c0, c0+n) of a layer instead of Gaussian
    ones.  Returns the K/V bytes written."""
    rng = np.random.default_rng(seed)
    pos = np.arange(cells) if positions is None else np.asarray(positions)
    scale = np.ones(width, np.float32)
    if outlier_channels:
        scale[rng.choice(width, outlier_channels, replace=False)] = 8
    with open(path, "wb") as f:
        f.write(np.array([0x6767736E, 10, cells], "<u4").tobytes())
        f.write(np.arange(cells, dtype="<i4").tobytes())
        f.write(np.array([len(arch)], "<u4").tobytes() + arch.encode())
        f.write(np.array([1, cells], "<u4").tobytes())
        meta = np.zeros((cells, 3), "<i4")
        meta[:, 0] = pos
        meta[:, 1] = 1
        f.write(meta.tobytes())
        f.write(np.array([0, layers], "<u4").tobytes())
        for kv in range(2):
            for layer in range(layers):
                f.write(np.array([1], "<i4").tobytes() + np.array([width * 2], "<u8").tobytes())
                for c0 in range(0, cells, 2048):
                    n = min(2048, cells - c0)
                    if kv == 0 and k_rows is not None:
                        x = np.asarray(k_rows(layer, c0, n), np.float32)
                    else:
                        x = rng.standard_normal((n, width), dtype=np.float32)
                        x = x * scale if outlier_channels else x
                    f.write(x.astype(np.float16).tobytes())
    return 2 * layers * cells * width * 2
