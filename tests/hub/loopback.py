"""A real HTTP server on 127.0.0.1 for pull tests: a package index, files, faults.

Serves registered byte blobs at paths, a PEP 691 JSON "simple" page per
project, honours Range requests, and can misbehave on purpose: close the
connection after N bytes, or send bytes slowly. Every request is logged so
tests can assert how many downloads happened and whether Range was used.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Blob:
    data: bytes
    drop_after: int | None = None
    """Close the connection after sending this many body bytes (per request)."""
    delay_per_chunk: float = 0.0
    drop_at: int | None = None
    """Close the connection once, when the file offset reaches this byte (a one-off network fault)."""
    die_after: int | None = None
    """The whole server dies (stops listening) after sending this many body bytes of this blob."""


@dataclass
class Loopback:
    server: ThreadingHTTPServer
    blobs: dict[str, Blob] = field(default_factory=dict)
    log: list[tuple[str, str, str | None]] = field(default_factory=list)
    """(method, path, Range header)."""

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, path: str, data: bytes, **kw) -> str:
        self.blobs[path] = Blob(data, **kw)
        return self.url + path

    def add_wheel(self, project: str, filename: str, data: bytes, sha256: str | None = None, **kw) -> str:
        """Serve a wheel and list it on /simple/<project>/ with its sha256."""
        url = self.add(f"/files/{filename}", data, **kw)
        norm = project.lower().replace("_", "-")
        page = {"meta": {"api-version": "1.0"}, "name": norm, "files": [
            {"filename": filename, "url": f"../../files/{filename}",
             "hashes": {"sha256": sha256 or hashlib.sha256(data).hexdigest()}, "size": len(data)}]}
        self.blobs[f"/simple/{norm}/"] = Blob(json.dumps(page).encode())
        return url

    def die(self) -> None:
        """Stop listening: later connections are refused, as with a crashed server."""
        self.server.shutdown()
        self.server.server_close()

    def gets(self, path: str) -> list[tuple[str, str, str | None]]:
        return [r for r in self.log if r[0] == "GET" and r[1] == path]


def start() -> Loopback:
    state: dict[str, Loopback] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # keep pytest output clean
            pass

        def do_GET(self) -> None:
            lb = state["lb"]
            rng = self.headers.get("Range")
            lb.log.append(("GET", self.path, rng))
            blob = lb.blobs.get(self.path)
            if blob is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data, status, start = blob.data, 200, 0
            if rng and rng.startswith("bytes="):
                start = int(rng[6:].split("-", 1)[0] or 0)
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status = 206
            body = data[start:]
            self.send_response(status)
            ctype = "application/vnd.pypi.simple.v1+json" if self.path.startswith("/simple/") else "application/octet-stream"
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            limit = len(body) if blob.drop_after is None else min(len(body), blob.drop_after)
            if blob.die_after is not None:
                limit = min(limit, max(0, blob.die_after - start))
            if blob.drop_at is not None and start < blob.drop_at:
                limit = min(limit, blob.drop_at - start)
                blob.drop_at = None
            sent = 0
            try:
                while sent < limit:
                    n = min(65536, limit - sent)
                    self.wfile.write(body[sent:sent + n])
                    sent += n
                    if blob.delay_per_chunk:
                        time.sleep(blob.delay_per_chunk)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return
            if sent < len(body):
                self.close_connection = True
                self.connection.shutdown(2)
                if blob.die_after is not None:
                    threading.Thread(target=lb.die, daemon=True).start()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    lb = Loopback(server)
    state["lb"] = lb
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return lb
