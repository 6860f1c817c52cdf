"""A package index the tests own: real wheels of a tiny package, served over HTTP by a real
process in both forms of the simple API (PEP 503 HTML for uv, PEP 691 JSON for `--between`).

Run as a script, it serves FOLDER on 127.0.0.1 (a free port, printed on its first line) and
answers 404 to everything while FOLDER/outage exists (an index that is down, or a mirror that
lost its packages: uv then says the package "was not found in the package registry").
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass(frozen=True)
class Release:
    version: str
    requires_python: str | None = None  # the file's `requires-python` (the JSON API shows it)
    requires: tuple[str, ...] = ()  # Requires-Dist lines (a missing one makes it unresolvable)
    tag: str = "py3-none-any"


def build_index(folder: Path, package: str, releases: list[Release]) -> None:
    """FOLDER/simple/<package>/: one wheel per release, and an index.json of its files."""
    where = folder / "simple" / package
    where.mkdir(parents=True, exist_ok=True)
    files: list[dict[str, object]] = []
    for release in releases:
        name = f"{package}-{release.version}-{release.tag}.whl"
        _wheel(where / name, package, release)
        files.append({"filename": name, "url": name, "hashes": {}, "requires-python": release.requires_python})
    (where / "index.json").write_text(json.dumps({"meta": {"api-version": "1.0"}, "name": package, "files": files}))


def _wheel(path: Path, package: str, release: Release) -> None:
    info = f"{package}-{release.version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {package}\nVersion: {release.version}\n"
    metadata += f"Requires-Python: {release.requires_python}\n" if release.requires_python else ""
    metadata += "".join(f"Requires-Dist: {r}\n" for r in release.requires)
    contents = {
        f"{package}/__init__.py": f"VERSION = {release.version!r}\n",
        f"{info}/METADATA": metadata,
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: fakeindex\nRoot-Is-Purelib: true\nTag: {release.tag}\n",
    }
    record = "".join(f"{p},sha256={_digest(c)},{len(c)}\n" for p, c in contents.items()) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in contents.items():
            archive.writestr(name, text)
        archive.writestr(f"{info}/RECORD", record)


def _digest(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


@contextmanager
def serving(folder: Path) -> Iterator[str]:
    """The index at FOLDER served by a real process for as long as the block runs: its URL."""
    server = subprocess.Popen([sys.executable, __file__, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        yield server.stdout.readline().strip()
    finally:
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()


class _Handler(BaseHTTPRequestHandler):
    root = Path(".")
    head = False

    def do_HEAD(self) -> None:  # uv asks a wheel's size first
        self.head = True
        self.do_GET()

    def do_GET(self) -> None:  # http.server's name
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if (self.root / "outage").exists() or len(parts) < 2 or parts[0] != "simple" or ".." in parts:
            self._send(404, b"not found", "text/plain")
            return
        where = self.root / "simple" / parts[1]
        if len(parts) == 3 and (where / parts[2]).is_file():
            self._send(200, (where / parts[2]).read_bytes(), "application/octet-stream")
        elif len(parts) == 2 and (where / "index.json").is_file():
            data = json.loads((where / "index.json").read_text())
            if "json" in self.headers.get("Accept", ""):
                self._send(200, json.dumps(data).encode(), "application/vnd.pypi.simple.v1+json")
            else:
                links = "".join(self._link(f) for f in data["files"])
                self._send(200, f"<html><body>{links}</body></html>".encode(), "text/html")
        else:
            self._send(404, b"not found", "text/plain")

    @staticmethod
    def _link(file: dict[str, str]) -> str:
        needs = file.get("requires-python")
        attribute = f' data-requires-python="{needs.replace(">", "&gt;").replace("<", "&lt;")}"' if needs else ""
        return f'<a href="{file["filename"]}"{attribute}>{file["filename"]}</a>'

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not self.head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # http.server's signature
        return None


if __name__ == "__main__":
    _Handler.root = Path(sys.argv[1])
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    print(f"http://127.0.0.1:{httpd.server_address[1]}/simple", flush=True)
    httpd.serve_forever()
