"""kv_long_speed.py [--model=gemma|smollm2] [--reps=5] [--sessions=judge|choose|all|NAME,...] [SWITCHES] -
snapshot speed and memory on the long sessions of tests/bench/long_sessions.py (Gemma 3 270M
at 24,576 tokens, SmolLM2-135M at 7,168)
(a benchmark, not a test): `tq encode-kvdump --model` against `zstd -3 -T2`
on the raw state, `tq decode-kvdump` against `zstd -d`, run alternately
(medians of interleaved runs, so that the machine's drift hits both), and
each tq run's peak anonymous memory (RssAnon, sampled every 5 ms: the
mapped state file is not the process's own memory).  SWITCHES go to the
encode (default: none, the balanced preset).
TQ_ORACLES/bin/python3 tests/bench/kv_long_speed.py --reps=5"""
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "oracle"))
from _env import TQ  # noqa: E402
from _timing import run_peak  # noqa: E402
from long_sessions import MODELS, session_path, text_names, split_options, table_head  # noqa: E402

OPTS, SWITCHES = split_options(("--reps=", "--sessions=", "--model="))
REPS = int(OPTS.get("--reps", 5))
SESSIONS = text_names(OPTS.get("--sessions", "judge"))
MODEL = OPTS.get("--model", "gemma")


def main():
    g = MODELS[MODEL]["path"]()
    table_head("session", "tq encode s", "zstd -3 -T2 s", "ratio", "tq decode s", "zstd -d s", "ratio",
               "tq MB / zstd MB", "peak anon MB encode / decode")
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        for sess in SESSIONS:
            state = session_path(sess, model=MODEL)
            enc = [TQ, "encode-kvdump", state, "-q", "-o", d / "x.tqkv", "--model", g, *SWITCHES]
            dec = [TQ, "decode-kvdump", d / "x.tqkv", "-q", "-o", d / "x.ggsn"]
            zc = ["zstd", "-3", "-T2", "-q", "-f", state, "-o", d / "x.zst"]
            zd = ["zstd", "-d", "-q", "-f", d / "x.zst", "-o", d / "x.raw"]
            t = {k: [] for k in ("enc", "zc", "dec", "zd")}
            mem = {"enc": 0.0, "dec": 0.0}
            for _ in range(REPS):
                for k, cmd in (("enc", enc), ("zc", zc), ("dec", dec), ("zd", zd)):
                    wall, peak = run_peak(cmd)
                    t[k].append(wall)
                    if k in mem:
                        mem[k] = max(mem[k], peak)
            m = {k: statistics.median(v) for k, v in t.items()}
            size = (d / "x.tqkv").stat().st_size / 1e6, (d / "x.zst").stat().st_size / 1e6
            print(f"| {sess} | {m['enc']:.2f} | {m['zc']:.2f} | {m['enc'] / m['zc']:.2f} | {m['dec']:.2f} | "
                  f"{m['zd']:.2f} | {m['dec'] / m['zd']:.2f} | {size[0]:.1f} / {size[1]:.1f} | "
                  f"{mem['enc']:.0f} / {mem['dec']:.0f} |", flush=True)
    print(f"\nmedians of {REPS} interleaved runs; encode switches: --model {' '.join(SWITCHES)}")


if __name__ == "__main__":
    main()
