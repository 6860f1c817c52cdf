"""A fake server the tests own: a real process doing real I/O, driven by its arguments.

Each argument is one action, done in order:
  out=TEXT  err=TEXT   a line on stdout / stderr ("\\r", "\\n" escapes understood)
  raw=TEXT             bytes with no line ending added
  split=TEXT           the line in three writes, 50 ms apart
  stamp=TEXT           "TEXT @<epoch>" (for latency figures)
  sleep=S  hang        wait S seconds / forever
  exit=N  signal=N     exit with a code / kill itself with a signal
  ignore-term          ignore SIGTERM from now on
  term-out=TEXT        on SIGTERM: the line on stdout, then exit 0
  child                start a child in the same group that sleeps forever
  worker               the same, but it writes "worker pid=N" first (so it is seen as a worker)
  worker=TITLE         a worker that names itself TITLE a second later, as setproctitle does
  kill-workers=SIG     send SIG to the workers (never reaped: they stay zombies, as a busy parent's do)
  daemon=PIDFILE       double-fork a grandchild that calls setsid, ignores SIGTERM, sleeps
  vanish=PIDFILE       the same, but the grandchild also starts afresh without diagbench's tag
                       variables (exec with a clean environment): neither group nor tag finds it
  progress=N           N tqdm-style "\\r" progress updates
  flood=MB             MB megabytes of log lines with binary junk every 1000 lines
  longline=MB          one line of MB megabytes
  junk                 a line of invalid UTF-8
  http=PATH            serve 200 on PATH at 127.0.0.1:$PORT from now on
  post=STATUS:TEXT     answer any POST with STATUS from now on, writing TEXT (if any) on stderr
                       first; after a 5xx answer exit 0, as vLLM's API server does when its
                       engine died under a request
  replay=FILE          write FILE's bytes, 4 KB at a time
  journal=FILE         append {"event": "start", t, pid, gpus: $CUDA_VISIBLE_DEVICES} to FILE now,
                       and {"event": "end", ...} when it exits (SIGTERM included)
  await=FILE:N         wait (up to 30 s) until FILE holds N start lines: N servers at once
  wait-for=FILE        wait (up to 60 s) until FILE exists: the test says when
  env=NAME             a line "NAME=<its value in this process>" (or "NAME unset") on stdout
  deadlock             take a lock twice in `load_weights` (blocks forever, no CPU)
  pipe-read            block in read(2) on a pipe whose write end it keeps and never writes
  child-deadlock[=VAR] start a Python child that deadlocks (as `deadlock`), then sleep forever;
                       with VAR, the child's command line carries that variable's value
  --flag=VALUE         ignored (a server's own option, for the command line)
  script=A;B;C         the actions A, B, C (one matrix value can carry a whole script)
  busy=S               burn CPU silently for S seconds (a compile that prints nothing)
  tick=S:N             N progress lines, S seconds apart (a slow starter)
"""

from __future__ import annotations

import atexit
import codecs
import ctypes
import functools
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


def say_and_exit(line: bytes, *_: object) -> None:
    write(OUT, line)
    os._exit(0)


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


VANISHED = (
    "import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(3600)"
)


def vanish(pidfile: str) -> None:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            clean = {k: v for k, v in os.environ.items() if not k.startswith("DIAGBENCH_")}
            os.execve(sys.executable, [sys.executable, "-c", VANISHED, pidfile], clean)
        os._exit(0)
    os.wait()
    deadline = time.monotonic() + 10
    while not os.path.exists(pidfile) and time.monotonic() < deadline:  # it is running before we go on
        time.sleep(0.01)


WORKERS: list[int] = []
ROUTES: dict[str, str] = {}  # "get": the path that answers 200; "post": "STATUS:TEXT"


def serve(**routes: str) -> None:
    """Start the HTTP server on the first call; later calls only change its answers."""
    started = bool(ROUTES)
    ROUTES.update(routes)
    if started:
        return

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == ROUTES.get("get") else 404)
            self.end_headers()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status, _, text = ROUTES.get("post", "404:").partition(":")
            if text:
                write(ERR, unescape(text) + b"\n")
            body = b'{"error": {"message": "fake answer ' + status.encode() + b'"}}'
            self.send_response(int(status))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            if int(status) >= 500:
                threading.Timer(0.2, os._exit, (0,)).start()

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


def load_weights() -> None:
    """Deadlocks the way a server does: a lock it already holds, taken again."""
    weights_lock = threading.Lock()
    with weights_lock:
        weights_lock.acquire()


def pipe_read() -> None:
    reader, _writer = os.pipe()  # the write end stays open here: read(2) never returns
    os.read(reader, 1)


def busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(10_000))


def child_deadlock(var: str) -> None:
    import subprocess

    passed = [f"--token={os.environ[var]}"] if var else []  # a launcher handing a secret down
    child = subprocess.Popen([sys.executable, __file__, *passed, "out=child up", "deadlock"])
    write(OUT, f"started child pid={child.pid}\n".encode())
    sleep_forever()


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
        elif name == "term-out":  # on SIGTERM: this line on stdout, then exit
            signal.signal(signal.SIGTERM, functools.partial(say_and_exit, unescape(arg) + b"\n"))
        elif name == "ignore-term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif name == "child":
            if os.fork() == 0:
                sleep_forever()
        elif name == "worker":
            pid = os.fork()
            if pid == 0:
                write(OUT, f"worker pid={os.getpid()}\n".encode())
                if arg:  # after diagbench has seen it under its first name
                    time.sleep(1)
                    ctypes.CDLL(None).prctl(15, arg.encode()[:15], 0, 0, 0)  # PR_SET_NAME, the kernel's name
                sleep_forever()
            WORKERS.append(pid)
            time.sleep(0.3)  # its line is out before the next action
        elif name == "kill-workers":
            for pid in WORKERS:
                os.kill(pid, int(arg))
        elif name == "daemon":
            daemon(arg)
        elif name == "vanish":
            vanish(arg)
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
            serve(get=arg)
        elif name == "post":
            serve(post=arg)
        elif name == "journal":
            journal(arg)
        elif name == "await":
            await_starts(arg)
        elif name == "wait-for":
            deadline = time.monotonic() + 60
            while not os.path.exists(arg) and time.monotonic() < deadline:
                time.sleep(0.02)
        elif name == "env":
            value = os.environ.get(arg)
            write(OUT, (f"{arg}={value}" if value is not None else f"{arg} unset").encode() + b"\n")
        elif name == "deadlock":
            load_weights()
        elif name == "pipe-read":
            pipe_read()
        elif name == "child-deadlock":
            child_deadlock(arg)
        elif name == "busy":
            busy(float(arg))
        elif name == "tick":
            every, _, count = arg.partition(":")
            for i in range(int(count)):
                write(OUT, f"still loading ({i + 1}/{count})".encode() + b"\n")
                time.sleep(float(every))
        elif name.startswith("--"):
            pass
        elif name == "script":
            main(arg.split(";"))
        elif name == "replay":
            with open(arg, "rb") as handle:
                while block := handle.read(4096):
                    write(OUT, block)
        else:
            raise SystemExit(f"fakeserver: unknown action {action!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
