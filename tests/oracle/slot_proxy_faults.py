"""tq slot proxy (issue 54) when things go wrong, and under load, against the real llama-server with
SmolLM2-135M; the proxy is tq built with ASan and UBSan (build/tests/tq-san) and must exit 0
on SIGTERM with no sanitizer report:

- faults, each answered as the server answers it (200, the content a request straight to the
  server gets), the proxy alive, no slot file left: the store removed, the store replaced by a
  file, a corrupt snapshot planted, the server restarted mid-request (the stream is cut, the
  next request is answered), a client gone mid-stream (the server's generation ends, nothing
  saved), the slot folder full (a 64 KiB tmpfs, as root), the object store (radosgw) stopped
  (answered within --timeout);
- concurrency: 8 conversations of 3 turns at once against a server with 4 slots through one
  proxy: every answer 200, every restore is of the request's own prefix (the server reuses
  every restored token: it compares them with the prompt), and the store ends consistent
  (every link's base there, no temporary left);
- two servers, each behind its proxy, one store: a conversation alternating between them
  restores every turn (each processes at most what the turn adds + 8), also when one runs an
  f16 cache and the other q8_0 (the proxy converts to the cache types the server holds; make
  test-full, TQ_TEST_FULL=1: make test leaves this pair to the conversion's quality below);
- SIGTERM while a stream is going: the stream finishes whole and its save completes, exit 0;
- an f16 server's session restored into a q8_0 server is as close to that server's prefill
  (teacher-forced KL) as its restore of its own raw save, within a factor.
Every server, proxy and radosgw is stopped at the end, also on failure."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import FAILED, FULL, ROOT, TQ, fail, ok, smollm2  # noqa: E402
from _proxy import Proxy, raw_files  # noqa: E402
from _server import Server, server_binary, servers_stopped  # noqa: E402
from _texts import source_text  # noqa: E402

SAN = ROOT / "build" / "tests" / "tq-san"
SAN_ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
FLAGS = ("--min-tokens", "256")


def document(i=0, chars=2400):
    """About 700 tokens of a package's text; i picks another part of it."""
    text = source_text("prose").decode()
    return text[i * chars:(i + 1) * chars]


def post(url, body, timeout=300):
    """(status, JSON or text) of one request."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def ask(base, messages, n=16):
    """A chat turn, greedy: (status, content, prompt tokens, processed)."""
    st, r = post(base + "/v1/chat/completions",
                 {"messages": messages, "max_tokens": n, "temperature": 0, "top_k": 1})
    if st != 200:
        return st, str(r)[:200], 0, 0
    return st, r["choices"][0]["message"]["content"], r["usage"]["prompt_tokens"], \
        r["timings"]["prompt_n"]


def turn_one(i=0):
    """A first turn on about 400 tokens: over the proxy's --min-tokens 256 (kept), and each
    fault's cold prefills (two a fault) half the time 2,400 characters take."""
    return [{"role": "system", "content": document(i, 1400)},
            {"role": "user", "content": "What happened, in one sentence?"}]


def sanitizer_clean(proxy):
    bad = proxy.lines(r"AddressSanitizer|LeakSanitizer|runtime error:")
    return proxy.exit_code == 0 and not bad, f"exit {proxy.exit_code}, {bad[:3]}"


class Faults:
    """The fault behaviours, one server and one proxy (tq-san) between them."""

    def __init__(self, binary, model, tmp):
        self.binary, self.model, self.tmp = binary, model, tmp

    def answered_as_the_server(self, name, server, proxy, messages):
        """A request through the proxy is answered as the server answers it straight, each
        to a server just started (the same batches: the same greedy answer)."""
        done = len(proxy.lines(r"slot \d+: prompt"))
        server.restart()
        st, got, _, _ = ask(proxy.url, messages)
        proxy.wait_requests(done + 1)
        proxy.wait_idle()
        server.restart()
        st2, want, _, _ = ask(f"http://127.0.0.1:{server.port}", messages)
        left = raw_files(server.slots)
        alive = proxy.proc.poll() is None
        if st != 200 or got != want or left or not alive:
            fail(name, f"through the proxy {st} {got!r}, straight {st2} {want!r}; files {left}, "
                       f"proxy alive {alive}; log: {proxy.text()[-400:]}")
        else:
            ok(name)

    def run(self):
        slots = self.tmp / "slots"
        slots.mkdir()
        store = self.tmp / "store"
        with Server(self.binary, self.model, slots) as server:
            proxy = Proxy(server, store, *FLAGS, tq=str(SAN), env=SAN_ENV)
            with proxy:
                self.store_faults(server, proxy, store)
                self.cuts(server, proxy)
            clean, why = sanitizer_clean(proxy)
            if clean:
                ok("the_proxy_under_faults_is_clean_under_asan_ubsan")
            else:
                fail("the_proxy_under_faults_is_clean_under_asan_ubsan", why)
        self.full_slot_folder()

    def store_faults(self, server, proxy, store):
        messages = turn_one(1)
        ask(proxy.url, messages)  # a session stored
        proxy.wait_requests(1)
        proxy.wait_idle()
        snaps = sorted((store / "snap").glob("*.tqkv"))
        for s in snaps:  # same length, bytes that are no snapshot
            s.write_bytes(os.urandom(s.stat().st_size))
        server.restart()
        self.answered_as_the_server("a_corrupt_snapshot_is_a_miss", server, proxy, messages)
        subprocess.run(["rm", "-rf", str(store)])
        self.answered_as_the_server("a_removed_store_is_a_miss", server, proxy, turn_one(2))
        subprocess.run(["rm", "-rf", str(store)])
        store.write_text("not a store\n")
        self.answered_as_the_server("a_store_replaced_by_a_file_is_a_miss", server, proxy,
                                    turn_one(3))
        store.unlink()

    def cuts(self, server, proxy):
        """The server killed mid-stream, then a client gone mid-stream."""
        body = {"messages": turn_one(4), "max_tokens": 400, "stream": True, "ignore_eos": True}
        p = subprocess.Popen(["curl", "-sN", "--max-time", "120", "-H",
                              "Content-Type: application/json", "-d", json.dumps(body),
                              proxy.url + "/v1/chat/completions"], stdout=subprocess.PIPE)
        events = 0
        for line in p.stdout:
            events += line.startswith(b"data: ")
            if events == 5:
                server.stop()
        p.wait()
        server.__enter__()  # up again on its port
        done = len(proxy.lines(r"slot \d+: prompt"))
        st, _, _, _ = ask(proxy.url, turn_one(5))
        # its slot file waits in the folder for the background save: not a leftover
        proxy.wait_requests(done + 1, 30)
        proxy.wait_idle()
        name = "a_server_killed_mid_stream_cuts_the_stream_and_the_next_is_answered"
        if events >= 400 or st != 200 or proxy.proc.poll() is not None or raw_files(server.slots):
            fail(name, f"{events} events, then {st}; files {raw_files(server.slots)}")
        else:
            ok(name)
        before = len(proxy.lines(r": complete$"))
        p = subprocess.run(["curl", "-sN", "--max-time", "1.5", "-H",
                            "Content-Type: application/json", "-d", json.dumps(body),
                            proxy.url + "/v1/chat/completions"], capture_output=True)
        proxy.wait_requests(len(proxy.lines(r"slot \d+: prompt")) + 1, 30)
        time.sleep(1)
        slots = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{server.port}/slots").read())
        busy = [s["id"] for s in slots if s["is_processing"]]
        cut = proxy.lines("cut short")
        saved = len(proxy.lines(r": complete$")) - before
        name = "a_client_gone_mid_stream_ends_the_generation_and_saves_nothing"
        if busy or not cut or saved or raw_files(server.slots):
            fail(name, f"curl exit {p.returncode}; slots busy {busy}; cut {cut}; saves {saved}")
        else:
            ok(name)

    def full_slot_folder(self):
        """The server's slot folder on a 64 KiB tmpfs: the raw save fails, the request not."""
        name = "a_full_slot_folder_is_one_line_and_the_answer_stands"
        mnt = self.tmp / "tiny"
        mnt.mkdir()
        if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs",
                                                str(mnt)], capture_output=True).returncode:
            print(f"  {name}: skipped (mounting a tmpfs needs root)")
            return
        try:
            with Server(self.binary, self.model, mnt) as server:
                with Proxy(server, self.tmp / "store-full", *FLAGS, tq=str(SAN), env=SAN_ENV,
                           log=self.tmp / "full.log") as proxy:
                    st, got, _, _ = ask(proxy.url, turn_one(6))
                    proxy.wait_requests(1)
                    proxy.wait_idle()
                    lines = proxy.lines("not saved")
                st2, want, _, _ = ask(f"http://127.0.0.1:{server.port}", turn_one(6))
                left = raw_files(mnt)
            clean, why = sanitizer_clean(proxy)
            if st != 200 or got != want or len(lines) != 1 or left or not clean:
                fail(name, f"{st} {got!r} / {want!r}; log {lines}; files {left}; {why}")
            else:
                ok(name)
        finally:
            subprocess.run(["umount", str(mnt)], capture_output=True)


def radosgw_stopped(binary, model, tmp):
    """A store in radosgw that stops: the next request is answered within --timeout + its
    own time, as the server answers it."""
    from _s3 import Store

    name = "radosgw_stopped_is_a_miss_within_the_timeout"
    s3 = Store()
    try:
        s3.__enter__()
    except SystemExit:
        print(f"  {name}: skipped (no radosgw)")
        return
    try:
        s3.bucket("proxy")
        slots = tmp / "s3-slots"
        slots.mkdir()
        with Server(binary, model, slots) as server:
            with Proxy(server, "s3://proxy/store", *FLAGS, "--timeout", "3", tq=str(SAN),
                       env=dict(s3.tq_env(), **{k: v for k, v in SAN_ENV.items()
                                                if k.endswith("SAN_OPTIONS")}),
                       log=tmp / "s3.log") as proxy:
                ask(proxy.url, turn_one(7))
                proxy.wait_requests(1)
                proxy.wait_idle()
                stored = proxy.lines(": complete$")
                s3.stop()
                server.restart()
                t0 = time.monotonic()
                st, got, _, _ = ask(proxy.url, turn_one(7) + [{"role": "assistant", "content": "x"},
                                                               {"role": "user", "content": "Why?"}])
                took = time.monotonic() - t0
                proxy.wait_requests(2)
            clean, why = sanitizer_clean(proxy)
        if not stored or st != 200 or took > 3 + 30 or not clean:
            fail(name, f"stored {stored}; then {st} in {took:.1f} s; {why}; {proxy.text()[-300:]}")
        else:
            ok(name)
            print(f"  {name}: answered in {took:.2f} s with the store down")
    finally:
        s3.stop()


def concurrency(binary, model, tmp):
    """8 conversations x 3 turns through one proxy, a server with 4 slots."""
    slots = tmp / "c-slots"
    slots.mkdir()
    store = tmp / "c-store"
    results = []
    lock = threading.Lock()
    with Server(binary, model, slots, "-np", "4", ctx=4 * 2048) as server:
        with Proxy(server, store, *FLAGS, tq=str(SAN), env=SAN_ENV, log=tmp / "c.log") as proxy:
            def talk(i):
                messages = turn_one(8 + i)
                for k in range(3):
                    st, answer, _, _ = ask(proxy.url, messages, n=8)
                    with lock:
                        results.append(st)
                    messages = messages + [{"role": "assistant", "content": answer},
                                           {"role": "user", "content": f"And then? ({k})"}]
            threads = [threading.Thread(target=talk, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            proxy.wait_requests(24)
            proxy.wait_idle()
        lines = proxy.lines(r"slot \d+: prompt")
        clean, why = sanitizer_clean(proxy)
    # the server reuses a restored token only where it is the prompt's: all of them reused
    # means the restore was of the request's own prefix
    wrong = []
    restores = 0
    for l in lines:
        m = re.search(r"prompt (\d+) tokens, held (\d+), restored (\d+).*server processed (\d+)", l)
        if not m:  # an answer cut short: none should be
            wrong.append(l)
            continue
        n, held, restored, processed = map(int, m.groups())
        restores += restored > 0
        if restored and processed > n - restored + 1:
            wrong.append(l)
    name = "eight_conversations_on_four_slots_restore_only_their_own_prefix"
    if results.count(200) != 24 or len(lines) != 24 or wrong or not restores or not clean:
        fail(name, f"answers {results}; {len(lines)} logged, {restores} restores; wrong: "
                   f"{wrong[:2]}; {why}")
    else:
        ok(name)
        print(f"  {name}: 24 answers, {restores} restored from the store")
    snaps = json.loads(subprocess.run([TQ, "slot", "ls", str(store), "--json"],
                                      capture_output=True, text=True).stdout or "[]")
    names = {s["name"] for s in snaps}
    orphans = [s["name"] for s in snaps if s["base"] and s["base"][:-5] not in names]
    temps = [str(p) for p in store.rglob("*.tmp.*")]
    name = "the_store_ends_consistent_after_concurrent_conversations"
    if not snaps or orphans or temps:
        fail(name, f"{len(snaps)} snapshots; links without their base {orphans}; temps {temps}")
    else:
        ok(name)


def two_servers(binary, model, tmp, b_flags=(), label="f16"):
    """One conversation alternating between two servers, each behind its proxy, one store."""
    store = tmp / f"two-store-{label}"
    (tmp / f"a-{label}").mkdir()
    (tmp / f"b-{label}").mkdir()
    with Server(binary, model, tmp / f"a-{label}") as a, \
            Server(binary, model, tmp / f"b-{label}", *b_flags) as b:
        with Proxy(a, store, *FLAGS, log=tmp / f"pa-{label}.log") as pa, \
                Proxy(b, store, *FLAGS, log=tmp / f"pb-{label}.log") as pb:
            messages = turn_one(20)
            prev = None
            worst = []
            for k in range(4):
                proxy = (pa, pb)[k % 2]
                st, answer, n_prompt, processed = ask(proxy.url, messages)
                proxy.wait_requests(k // 2 + 1)
                proxy.wait_idle()
                if prev is not None:
                    worst.append((processed, n_prompt - prev + 8))
                prev = n_prompt
                messages = messages + [{"role": "assistant", "content": answer},
                                       {"role": "user", "content": f"Say more ({k})."}]
    name = f"a_conversation_alternating_between_two_servers_restores_every_turn_{label}"
    if any(p > a for p, a in worst) or len(worst) != 3:
        fail(name, f"(processed, allowed): {worst}; {pb.text()[-500:]}")
    else:
        ok(name)
        print(f"  {name}: (processed, allowed) {worst}")


def sigterm_mid_stream(binary, model, tmp):
    """SIGTERM while a stream is going: it finishes whole, its save completes, exit 0."""
    (tmp / "t-slots").mkdir()
    with Server(binary, model, tmp / "t-slots") as server:
        proxy = Proxy(server, tmp / "t-store", *FLAGS, tq=str(SAN), env=SAN_ENV,
                      log=tmp / "t.log")
        with proxy:
            body = {"messages": turn_one(40), "max_tokens": 120, "stream": True,
                    "ignore_eos": True}
            p = subprocess.Popen(["curl", "-sN", "--max-time", "120", "-H",
                                  "Content-Type: application/json", "-d", json.dumps(body),
                                  proxy.url + "/v1/chat/completions"], stdout=subprocess.PIPE)
            events = 0
            done = False
            for line in p.stdout:
                events += line.startswith(b"data: {")
                done |= b"[DONE]" in line
                if events == 10:
                    proxy.proc.send_signal(signal.SIGTERM)
            p.wait()
            proxy.stop()
        clean, why = sanitizer_clean(proxy)
        saved = proxy.lines(": complete$")
    name = "sigterm_lets_a_stream_in_flight_finish_and_its_save_complete"
    if events < 120 or not done or not saved or not clean or raw_files(tmp / "t-slots"):
        fail(name, f"{events} events, done {done}; saves {saved}; {why}")
    else:
        ok(name)


def converted_restore_quality(binary, model, tmp):
    """A session saved by an f16 server (--preset lossless) restored into a q8_0 server
    (converted: rotated q8_0 rows): its teacher-forced KL against the q8_0 server's own prefill
    is of the order of the server's restore of its own raw save."""
    from _server import kl_along

    (tmp / "qa").mkdir()
    (tmp / "qb").mkdir()
    store = tmp / "q-store"
    with Server(binary, model, tmp / "qa") as a, \
            Server(binary, model, tmp / "qb", "-ctk", "q8_0", "-ctv", "q8_0") as b:
        doc = document(30)
        toks = a.tokenize(doc)
        a.complete(toks, 1)
        p = subprocess.run([TQ, "slot", "save", "--server", f"http://127.0.0.1:{a.port}",
                            "--slot-dir", tmp / "qa", "--store", store, "--preset", "lossless"],
                           capture_output=True, text=True)
        prompt = b.tokenize(doc + " Then")
        b.slot("erase")
        ref = b.complete(prompt, 16)["steps"]
        b.slot("erase")
        b.complete(toks, 1)
        b.slot("save", "own.bin")
        kl_raw = kl_along(b, prompt, ref, restore="own.bin")
        (tmp / "qb" / "own.bin").unlink()
        b.slot("erase")
        (tmp / "prompt.txt").write_text(doc + " Then")
        r = subprocess.run([TQ, "slot", "restore", "--server", f"http://127.0.0.1:{b.port}",
                            "--slot-dir", tmp / "qb", "--store", store, "--prompt",
                            tmp / "prompt.txt"], capture_output=True, text=True)
        kl_conv = kl_along(b, prompt, ref)
    name = "an_f16_session_restores_into_a_q8_0_server_as_closely_as_its_own_raw_save"
    print(f"  {name}: KL {kl_conv:.2e} (the q8_0 server's raw restore of its own save "
          f"{kl_raw:.2e})")
    if p.returncode or r.returncode or "converted" not in r.stderr or \
            kl_conv > max(3 * kl_raw, kl_raw + 0.01):
        fail(name, f"save {p.returncode} {p.stderr.strip()}; restore {r.returncode} "
                   f"{r.stderr.strip()}; KL {kl_conv} against {kl_raw}")
    else:
        ok(name)


def main():
    if not SAN.exists():
        print(f"no {SAN}: make {SAN.relative_to(ROOT)}")
        sys.exit(77)
    binary = server_binary()
    model = smollm2()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "faults").mkdir()
        Faults(binary, model, tmp / "faults").run()
        radosgw_stopped(binary, model, tmp)
        concurrency(binary, model, tmp)
        two_servers(binary, model, tmp)
        if FULL:
            two_servers(binary, model, tmp, ("-ctk", "q8_0", "-ctv", "q8_0"), "f16_and_q8_0")
        converted_restore_quality(binary, model, tmp)
        sigterm_mid_stream(binary, model, tmp)
    servers_stopped()
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
