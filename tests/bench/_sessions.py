"""Generated llama.cpp session files for the benchmarks (not a benchmark
itself): one KV cache of `layers` f16 K and V tensors of `cells` rows of
`width` Gaussian values, cell i at position i of sequence 0."""
import numpy as np


def write_session(path, layers, width, cells, outlier_channels=0, seed=0):
    """outlier_channels: that many channels of every K/V row 8x larger, as
    real K caches have.  Returns the K/V bytes written."""
    rng = np.random.default_rng(seed)
    scale = np.ones(width, np.float32)
    if outlier_channels:
        scale[rng.choice(width, outlier_channels, replace=False)] = 8
    with open(path, "wb") as f:
        f.write(np.array([0x6767736E, 10, cells], "<u4").tobytes())
        f.write(np.arange(cells, dtype="<i4").tobytes())
        f.write(np.array([5], "<u4").tobytes() + b"llama")
        f.write(np.array([1, cells], "<u4").tobytes())
        meta = np.zeros((cells, 3), "<i4")
        meta[:, 0] = np.arange(cells)
        meta[:, 1] = 1
        f.write(meta.tobytes())
        f.write(np.array([0, layers], "<u4").tobytes())
        for _ in range(2):
            for _ in range(layers):
                f.write(np.array([1], "<i4").tobytes() + np.array([width * 2], "<u8").tobytes())
                for c0 in range(0, cells, 2048):
                    n = min(2048, cells - c0)
                    x = rng.standard_normal((n, width), dtype=np.float32)
                    f.write((x * scale if outlier_channels else x).astype(np.float16).tobytes())
    return 2 * layers * cells * width * 2
