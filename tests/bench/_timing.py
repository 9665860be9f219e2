"""Shared by the benchmark scripts (not a benchmark itself)."""
import statistics
import subprocess
import time


def timed(cmd, reps=3):
    """Median wall time of `reps` runs of cmd (output discarded)."""
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t.append(time.perf_counter() - t0)
    return statistics.median(t)
