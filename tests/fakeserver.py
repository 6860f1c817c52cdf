"""A fake server the tests own: a real process doing real I/O, driven by its arguments.

Each argument is one action, done in order:
  out=TEXT  err=TEXT   a line on stdout / stderr ("\\r", "\\n" escapes understood)
  raw=TEXT             bytes with no line ending added
  split=TEXT           the line in three writes, 50 ms apart
  stamp=TEXT           "TEXT @<epoch>" (for latency figures)
  sleep=S  hang        wait S seconds / forever
  exit=N  signal=N     exit with a code / kill itself with a signal
  ignore-term          ignore SIGTERM from now on
  child                start a child in the same group that sleeps forever
  daemon=PIDFILE       double-fork a grandchild that calls setsid, ignores SIGTERM, sleeps
  progress=N           N tqdm-style "\\r" progress updates
  flood=MB             MB megabytes of log lines with binary junk every 1000 lines
  longline=MB          one line of MB megabytes
  junk                 a line of invalid UTF-8
  http=PATH            serve 200 on PATH at 127.0.0.1:$PORT from now on
  replay=FILE          write FILE's bytes, 4 KB at a time
  journal=FILE         append {"event": "start", t, pid, gpus: $CUDA_VISIBLE_DEVICES} to FILE now,
                       and {"event": "end", ...} when it exits (SIGTERM included)
  await=FILE:N         wait (up to 30 s) until FILE holds N start lines: N servers at once
"""

from __future__ import annotations

import atexit
import codecs
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OUT = sys.stdout.buffer
ERR = sys.stderr.buffer


def write(stream, data: bytes) -> None:
    stream.write(data)
    stream.flush()


def unescape(text: str) -> bytes:
    return codecs.decode(text, "unicode_escape").encode("utf-8", errors="surrogateescape")


def sleep_forever() -> None:
    while True:
        time.sleep(3600)


def daemon(pidfile: str) -> None:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with open(pidfile, "w") as handle:
                handle.write(str(os.getpid()))
            sleep_forever()
        os._exit(0)
    os.wait()


def serve(path: str) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == path else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()


def journal(path: str) -> None:
    def note(event: str) -> None:
        entry = {"event": event, "t": time.time(), "pid": os.getpid(), "gpus": os.environ.get("CUDA_VISIBLE_DEVICES")}
        with open(path, "a") as handle:  # one short append per line: whole lines, whoever else writes
            handle.write(json.dumps(entry) + "\n")

    note("start")
    atexit.register(note, "end")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))


def await_starts(arg: str) -> None:
    path, _, count = arg.rpartition(":")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(path) as handle:
            if sum('"start"' in line for line in handle) >= int(count):
                return
        time.sleep(0.02)


def flood(megabytes: float) -> None:
    line = b"[2025-05-01 10:00:00 TP0] Decode batch. #running-req: 1, #token: 1024, token usage: 0.01, gen throughput (token/s): 42.00\n"
    junk = b"\xff\xfe\x00\x80binary\xc3\x28junk\n"
    block = (line * 1000) + junk
    total = int(megabytes * (1 << 20))
    written = 0
    while written < total:
        write(OUT, block)
        written += len(block)


def main(actions: list[str]) -> None:
    for action in actions:
        name, _, arg = action.partition("=")
        if name == "out":
            write(OUT, unescape(arg) + b"\n")
        elif name == "err":
            write(ERR, unescape(arg) + b"\n")
        elif name == "raw":
            write(OUT, unescape(arg))
        elif name == "split":
            data = unescape(arg) + b"\n"
            third = max(1, len(data) // 3)
            for start in range(0, len(data), third):
                write(OUT, data[start : start + third])
                time.sleep(0.05)
        elif name == "stamp":
            write(OUT, f"{arg} @{time.time():.6f}\n".encode())
        elif name == "sleep":
            time.sleep(float(arg))
        elif name == "hang":
            sleep_forever()
        elif name == "exit":
            sys.exit(int(arg))
        elif name == "signal":
            os.kill(os.getpid(), int(arg))
            time.sleep(5)
        elif name == "ignore-term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif name == "child":
            if os.fork() == 0:
                sleep_forever()
        elif name == "daemon":
            daemon(arg)
        elif name == "progress":
            for i in range(int(arg)):
                write(
                    ERR,
                    f"\rCapturing batches (bs={160 - i} avail_mem=40.{i:02d} GB): {i * 100 // int(arg):3d}%|".encode(),
                )
                time.sleep(0.01)
        elif name == "flood":
            flood(float(arg))
        elif name == "longline":
            write(OUT, b"x" * int(float(arg) * (1 << 20)) + b"\n")
        elif name == "junk":
            write(OUT, b"\xff\xfe\xfd garbage \x80\x81 \xc3\x28\n")
        elif name == "http":
            serve(arg)
        elif name == "journal":
            journal(arg)
        elif name == "await":
            await_starts(arg)
        elif name == "replay":
            with open(arg, "rb") as handle:
                while block := handle.read(4096):
                    write(OUT, block)
        else:
            raise SystemExit(f"fakeserver: unknown action {action!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
