"""Shared by the benchmark scripts (not a benchmark itself)."""
import statistics
import subprocess
import time
from pathlib import Path


def timed(cmd, reps=3):
    """Median wall time of `reps` runs of cmd (output discarded)."""
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t.append(time.perf_counter() - t0)
    return statistics.median(t)


def run_peak(cmd, env=None, stdout=subprocess.DEVNULL):
    """Wall seconds and peak RssAnon (MB, sampled every 5 ms: a mapped input is not the
    process's own memory) of one run; a failure ends the benchmark with its stderr."""
    t0 = time.perf_counter()
    p = subprocess.Popen([str(c) for c in cmd], env=env, stdout=stdout, stderr=subprocess.PIPE)
    peak = 0
    while p.poll() is None:
        try:
            for line in Path(f"/proc/{p.pid}/status").read_text().splitlines():
                if line.startswith("RssAnon:"):
                    peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.005)
    wall = time.perf_counter() - t0
    if p.returncode:
        err = p.stderr.read().decode(errors="replace")
        raise SystemExit(f"{' '.join(map(str, cmd))}: exit {p.returncode}: {err}")
    return wall, peak / 1024


def timed_call(fn):
    """Wall seconds of one call of fn."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def tq_slot(tq, env, *args):
    """`tq slot ARGS...`'s stderr; a failure ends the benchmark with it."""
    p = subprocess.run([tq, "slot", *map(str, args)], capture_output=True, text=True, env=env)
    if p.returncode:
        raise SystemExit(f"tq slot {args[0]}: {p.stderr.strip()}")
    return p.stderr
