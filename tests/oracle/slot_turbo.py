"""tq slot save / restore of a TurboQuant+ fork server's slot (issue 48): the slot file is a
llama.cpp sequence state with turbo3 or turbo4 K/V, written by tq's writer in the fork's
layout (decode-kvdump --cache-type), for the fork at 69d8e4be4 and after its PR #197, served
by a server of our own (_fake_server.py: no fork build runs here) whose /props names the
build.  Every preset saves; no raw slot file stays in --slot-dir; the restore is a state of
the same revision (lossless: the very bytes)."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FAILED, TQ, fail, ok  # noqa: E402
from _fake_server import HEAD, FakeServer, model, state, tokens_of  # noqa: E402

PRESETS = ["lossless", "q8", "balanced", "small"]
# a revision, the build /props names for it (None: a build tq does not know), the turbo4
# block's bytes
REVISIONS = [("69d8e4be4", "b9079-69d8e4be4", 68), ("pr197", None, 66)]


def tq(*args):
    p = subprocess.run([TQ, *map(str, args)], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stderr.strip(), p.stdout


def turbo_state(work, tokens, cache, rev):
    """The fake server's f16 slot of these tokens as a fork server of rev would write it."""
    f16 = work / "f16.ggsq"
    f16.write_bytes(state(tokens))
    snap, out = work / "f16.tqkv", work / f"{cache}-{rev}.ggsq"
    for args in (("encode-kvdump", f16, "-o", snap, "--preset", "lossless", "-q"),
                 ("decode-kvdump", snap, "-o", out, "--cache-type", cache, "--head-dim", HEAD,
                  "--fork-rev", rev, "-q")):
        rc, err, _ = tq(*args)
        if rc:
            raise SystemExit(f"FAIL: making the {cache} state: {err}")
    return out.read_bytes()


def revision_of(path):
    """What tq inspect says of a state: (revision, how), or the error."""
    rc, err, out = tq("inspect", path)
    line = next((x for x in out.splitlines() if x.startswith("fork revision:")), err)
    return line.split(":", 1)[1].strip() if ":" in line else line


def snapshot_rev(store):
    """The revision the store's one snapshot records (inspect --json: type_profile)."""
    import json
    snaps = list(Path(store).rglob("*.tqkv"))
    if len(snaps) != 1:
        return f"{len(snaps)} snapshots"
    rc, err, out = tq("inspect", "--json", snaps[0])
    return json.loads(out)["type_profile"] if rc == 0 else err


def main():
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        slots, m = work / "slots", model(work / "m.gguf")
        slots.mkdir()
        prompt = work / "prompt.txt"
        prompt.write_text("a prompt the server tokenizes as its session's tokens\n")
        tokens = tokens_of(300)
        with FakeServer(slots, m) as srv:
            srv.tokens = tokens
            for cache in ("turbo3", "turbo4"):
                for rev, build, t4_bytes in REVISIONS:
                    raw = turbo_state(work, tokens, cache, rev)
                    srv.slot_bytes, srv.build_info = raw, build
                    for preset in PRESETS:
                        name = f"{cache}_{rev}_slot_{preset}_saves_and_restores"
                        store = work / f"store-{cache}-{rev}-{preset}"
                        s = ["--server", srv.url, "--slot-dir", slots, "--store", store,
                             "--model", m]
                        rc, err, _ = tq("slot", "save", *s, "--preset", preset, "-q")
                        left = sorted(p.name for p in slots.iterdir())
                        if rc or left:
                            fail(name, f"save exit {rc}: {err}; left in --slot-dir: {left}")
                            continue
                        srv.restored.clear()
                        rc, err, _ = tq("slot", "restore", *s, "--prompt", prompt, "-q")
                        if rc or not srv.restored:
                            fail(name, f"restore exit {rc}: {err}")
                            continue
                        back = work / "restored.ggsq"
                        back.write_bytes(srv.restored[-1])
                        # turbo4 tells its revision by its blocks; turbo3 cannot, so the
                        # snapshot must record the one the server's build named
                        got = revision_of(back) if cache == "turbo4" else snapshot_rev(store)
                        same = srv.restored[-1] == raw
                        if preset == "lossless" and not same:
                            fail(name, "the lossless restore is not the saved slot's bytes")
                        elif len(srv.restored[-1]) != len(raw) or not got.startswith(rev):
                            fail(name, f"restored {len(srv.restored[-1])} bytes of revision "
                                       f"'{got}', saved {len(raw)} bytes of {rev}")
                        else:
                            ok(name)
                        for p in slots.iterdir():
                            p.unlink()
                    if rev == "69d8e4be4":  # its snapshot into a server whose build tq does
                        srv.build_info = None  # not know: written for the newest revision
                        srv.restored.clear()
                        rc, err, _ = tq("slot", "restore", *s, "--prompt", prompt, "-q")
                        back = work / "restored.ggsq"
                        back.write_bytes(srv.restored[-1] if srv.restored else b"")
                        got = revision_of(back)
                        name = f"{cache}_69d8e4be4_snapshot_restores_for_a_newer_build"
                        if rc or srv.restored[-1] == raw:
                            fail(name, f"exit {rc}: {err}; the old revision's bytes restored")
                        elif cache == "turbo4" and not got.startswith("pr197"):
                            fail(name, f"restored revision '{got}', not pr197")
                        else:
                            ok(name)
                        for p in slots.iterdir():
                            p.unlink()
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
