#!/usr/bin/env python3
"""tests/s3_proxy.py - a TCP proxy between an S3 client and radosgw, for fault injection.

    python3 tests/s3_proxy.py --to 127.0.0.1:PORT [--port-file F] [--count-file C]
                              [--cut-up N] [--cut-down N] [--cuts K]
                              [--status CODE --fail K [--retry-after S] [--skew S]]
                              [--stall S --stalls K] [--throttle BYTES_PER_S]
                              [--dates FILE] [--gate FILE [--hold-after K]]

The object-store tests point the client at this proxy instead of at radosgw
(tests/setup_s3.sh) to see how it copes with what a real network and a real S3 do:
connections that die mid-upload or mid-download, and "503 SlowDown" answers that
must be retried.  It also counts the bytes that cross, so that a test can check
that a ranged read fetched only its range, or that a resumed transfer did not
start over.

- Listens on 127.0.0.1, on a port the kernel picks (so tests can run side by
  side); writes it to --port-file once listening, which tests wait for.
- Forwards bytes both ways and counts them over all connections: "up" is what
  was passed to the server, "down" what was passed to the client (handed to the
  kernel; a cut connection may lose some).  Injected answers are not counted:
  they are not the server's.  --count-file gets "up N" and "down N" lines,
  rewritten atomically (temp file + rename) at start, whenever a connection
  closes, and on exit.
- --cut-up N / --cut-down N: once N bytes have gone client->server (or
  server->client) on one connection, counted per connection (keep-alive
  requests add up), that connection is reset on both sides (RST).  Exactly N
  bytes are passed on first.  --cuts K: only the first K connections that reach
  a threshold are cut; later ones pass untouched (0, the default: all).
- --status CODE --fail K: each of the first K connections gets, once the
  request head has arrived, an HTTP/1.1 answer with that status and an S3 XML
  error body (SlowDown for 503, InternalError otherwise), "Connection: close",
  and is closed; the server never sees it.  Later connections are forwarded.
- --retry-after S: the injected answers carry "Retry-After: S".
- --skew S (with --status 403): the injected answers say RequestTimeTooSkewed, with a Date
  S seconds from now (the server's clock as a skewed one would tell it; the machine's clock is
  untouched).
- --stall S --stalls K: the first K connections pass the answer's first bytes (its head) and
  then hold the rest for S seconds: a stalled download.
- --throttle B: answers pass at B bytes a second at most (each connection).
- --dates FILE: the X-Amz-Date of every forwarded request is appended to FILE, a line each.
- --gate FILE: connections from the --hold-after'th on (default 1: all but the first) wait,
  once accepted, until FILE exists; FILE.held appears when one waits.  A test changes the
  store in between (a racing writer) while the client holds what it read before.
- Runs until SIGTERM or SIGINT.  A line per connection goes to stderr.
"""

import argparse
import asyncio
import email.utils
import re
import time
import http
import os
import signal
import socket
import struct
import sys

BUFSIZE = 65536
# How long an injected answer waits for the client to finish sending and close:
# closing a socket with unread data in it sends an RST, which can make the client
# lose the answer before it reads it.
LINGER_S = 2.0

ERROR_BODIES = {
    503: ("SlowDown", "Please reduce your request rate."),
    403: ("RequestTimeTooSkewed",
          "The difference between the request time and the current time is too large."),
}
DEFAULT_ERROR = ("InternalError", "We encountered an internal error. Please try again.")


def log(msg):
    print(f"s3_proxy: {msg}", file=sys.stderr, flush=True)


def write_atomically(path, text):
    # A test polling the file must never read half of it.
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def reset(writer):
    """Close abruptly: SO_LINGER 0 makes the close send an RST, not a FIN, so
    the peer sees "connection reset" as on a real network failure."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


def error_answer(code, retry_after=None, skew=None):
    s3code, message = ERROR_BODIES.get(code, DEFAULT_ERROR)
    extra = f"Retry-After: {retry_after}\r\n" if retry_after is not None else ""
    if skew is not None:
        extra += "Date: " + email.utils.formatdate(time.time() + skew, usegmt=True) + "\r\n"
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{s3code}</Code><Message>{message}</Message>"
            "<RequestId>s3-proxy</RequestId></Error>").encode()
    try:
        reason = http.HTTPStatus(code).phrase
    except ValueError:
        reason = "Error"
    head = (f"HTTP/1.1 {code} {reason}\r\n"
            "Content-Type: application/xml\r\n"
            f"Content-Length: {len(body)}\r\n"
            "x-amz-request-id: s3-proxy\r\n" + extra +
            "Connection: close\r\n\r\n").encode()
    return head + body


class Proxy:
    def __init__(self, args):
        self.args = args
        self.host, port = args.to.rsplit(":", 1)
        self.port = int(port)
        self.up = 0
        self.down = 0
        self.accepted = 0
        self.cuts_done = 0
        self.tasks = {}  # handler task -> writers of its connection, to reset them on exit

    def write_counts(self):
        if self.args.count_file:
            write_atomically(self.args.count_file, f"up {self.up}\ndown {self.down}\n")

    def may_cut(self):
        """Whether one more connection that reached a threshold is to be cut."""
        if self.args.cuts and self.cuts_done >= self.args.cuts:
            return False
        self.cuts_done += 1
        return True

    async def handle(self, creader, cwriter):
        n = self.accepted
        self.accepted += 1
        task = asyncio.current_task()
        self.tasks[task] = [cwriter]
        try:
            if self.args.gate and n >= self.args.hold_after:
                await self.hold(n)
            if self.args.status and n < self.args.fail:
                await self.inject(n, creader, cwriter)
            else:
                await self.forward(n, creader, cwriter, self.tasks[task])
        finally:
            del self.tasks[task]
            if not cwriter.transport.is_closing():
                cwriter.transport.abort()
            self.write_counts()

    async def hold(self, n):
        """--gate: say that connection n is held (GATE.held), then wait for GATE to exist, so
        that a test can change the store between a client's requests."""
        with open(f"{self.args.gate}.held", "w"):
            pass
        log(f"connection {n} held until {self.args.gate} exists")
        while not os.path.exists(self.args.gate):
            await asyncio.sleep(0.01)

    async def inject(self, n, creader, cwriter):
        try:
            await creader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            log(f"conn {n}: closed before a request head")
            return
        cwriter.write(error_answer(self.args.status, self.args.retry_after, self.args.skew))
        try:
            await cwriter.drain()
            cwriter.write_eof()
            # Swallow what the client still sends (a request body) until it closes.
            async def swallow():
                while await creader.read(BUFSIZE):
                    pass
            await asyncio.wait_for(swallow(), LINGER_S)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass
        cwriter.close()
        log(f"conn {n}: answered {self.args.status}")

    async def forward(self, n, creader, cwriter, writers):
        try:
            sreader, swriter = await asyncio.open_connection(self.host, self.port)
        except OSError as e:
            log(f"conn {n}: cannot reach {self.args.to}: {e}")
            return
        writers.append(swriter)
        # With no write buffering in asyncio, drain() returns only once the bytes
        # are with the kernel: a cut then comes after exactly N bytes.
        for w in (cwriter, swriter):
            w.transport.set_write_buffer_limits(high=0)
        state = {"up": 0, "down": 0, "cut": None}

        def cut(why):
            if state["cut"] is None:
                state["cut"] = why
            reset(cwriter)
            reset(swriter)

        stall = self.args.stall if n < self.args.stalls else 0

        async def pump(src, dst, direction, limit):
            nonlocal stall
            armed = limit is not None
            try:
                while True:
                    data = await src.read(BUFSIZE if not self.args.throttle else 16384)
                    if direction == "up" and self.args.dates:
                        for m in re.finditer(rb"(?im)^x-amz-date: *(\S+)\r?$", data):
                            with open(self.args.dates, "a") as f:
                                f.write(m.group(1).decode() + "\n")
                    if direction == "down" and stall and state["down"]:
                        log(f"conn {n}: answer held {stall} s")
                        await asyncio.sleep(stall)
                        stall = 0
                    if direction == "down" and self.args.throttle and data:
                        await asyncio.sleep(len(data) / self.args.throttle)
                    if not data:
                        # Half-close: the other direction may still be busy.
                        if dst.can_write_eof() and not dst.transport.is_closing():
                            dst.write_eof()
                        return
                    done = state[direction]
                    if armed and done + len(data) >= limit:
                        if self.may_cut():
                            data = data[:limit - done]
                            dst.write(data)
                            self.count(direction, state, len(data))
                            await dst.drain()
                            cut(f"cut-{direction} after {limit} bytes")
                            return
                        armed = False
                    dst.write(data)
                    self.count(direction, state, len(data))
                    await dst.drain()
            except (ConnectionError, OSError):
                # One side went away abruptly: so does the other.
                cut(state["cut"] or f"{direction} side reset")

        await asyncio.gather(
            pump(creader, swriter, "up", self.args.cut_up),
            pump(sreader, cwriter, "down", self.args.cut_down))
        for w in (swriter, cwriter):
            if not w.transport.is_closing():
                w.close()
        log(f"conn {n}: up {state['up']} down {state['down']}"
            + (f" ({state['cut']})" if state["cut"] else ""))

    def count(self, direction, state, nbytes):
        state[direction] += nbytes
        if direction == "up":
            self.up += nbytes
        else:
            self.down += nbytes

    async def run(self):
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        self.write_counts()
        if self.args.port_file:
            write_atomically(self.args.port_file, f"{port}\n")
        log(f"listening on 127.0.0.1:{port}, forwarding to {self.args.to}")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        server.close()
        # Connections still open are reset; their handlers then finish (and log) by
        # themselves rather than being cancelled.
        tasks = list(self.tasks)
        for writers in self.tasks.values():
            for w in writers:
                reset(w)
        if tasks:
            await asyncio.wait(tasks, timeout=2)
        self.write_counts()
        log(f"exiting: up {self.up} down {self.down}")


def main():
    p = argparse.ArgumentParser(description="Fault-injecting TCP proxy for the S3 tests.")
    p.add_argument("--to", required=True, metavar="HOST:PORT", help="the server (radosgw)")
    p.add_argument("--port-file", help="write the listening port here once listening")
    p.add_argument("--count-file", help='keep "up N" / "down N" byte counts here')
    p.add_argument("--cut-up", type=int, metavar="N",
                   help="reset a connection once N bytes went client->server on it")
    p.add_argument("--cut-down", type=int, metavar="N",
                   help="reset a connection once N bytes went server->client on it")
    p.add_argument("--cuts", type=int, default=0, metavar="K",
                   help="cut only the first K connections reaching a threshold (0: all)")
    p.add_argument("--status", type=int, metavar="CODE",
                   help="answer the first --fail connections with this HTTP status")
    p.add_argument("--fail", type=int, default=0, metavar="K",
                   help="how many connections get the --status answer")
    p.add_argument("--retry-after", type=int, metavar="S",
                   help="the injected answers carry Retry-After: S")
    p.add_argument("--skew", type=int, metavar="S",
                   help="with --status 403: RequestTimeTooSkewed and a Date S seconds off")
    p.add_argument("--stall", type=float, default=0, metavar="S",
                   help="hold the first --stalls answers after their first bytes for S s")
    p.add_argument("--stalls", type=int, default=0, metavar="K")
    p.add_argument("--throttle", type=int, default=0, metavar="B",
                   help="answers at B bytes a second at most")
    p.add_argument("--dates", metavar="FILE",
                   help="append every forwarded request's X-Amz-Date to FILE")
    p.add_argument("--gate", metavar="FILE",
                   help="hold connections from the --hold-after'th until FILE exists")
    p.add_argument("--hold-after", type=int, default=1, metavar="K",
                   help="connections before the K'th (from 0) pass the gate at once")
    args = p.parse_args()
    if (args.status is None) != (args.fail == 0):
        p.error("--status and --fail go together")
    for name in ("cut_up", "cut_down", "cuts", "fail"):
        v = getattr(args, name)
        if v is not None and v < 0:
            p.error(f"--{name.replace('_', '-')} must not be negative")
    asyncio.run(Proxy(args).run())


if __name__ == "__main__":
    main()
