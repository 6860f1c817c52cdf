"""JSON over a standard-library HTTP handler: the request's body read and an answer written, the
same way for the demo's simulated server (simulator.py) and the reference server (refserver/)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

from diagbench.jsonvalue import JSON

__all__ = ["read_json", "reply_json"]


def read_json(handler: BaseHTTPRequestHandler) -> JSON:
    """The request's body as JSON (`{}` when empty); ValueError when it is not JSON."""
    body: JSON = json.loads(handler.rfile.read(int(handler.headers.get("Content-Length", 0))) or b"{}")
    return body


def reply_json(handler: BaseHTTPRequestHandler, code: int, data: JSON) -> None:
    """An answer with `data` as its JSON body and its length said."""
    payload = json.dumps(data).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)
