"""A real HTTP server on 127.0.0.1 for pull tests: a package index, files, faults.

Serves registered byte blobs at paths, a PEP 691 JSON "simple" page per
project, honours Range requests, and can misbehave on purpose: close the
connection after N bytes, or send bytes slowly; name each version of a
file with an ETag or a Last-Modified date and honour If-Range (or not),
change a file right after a dropped connection, lie in Content-Range,
loop on redirects, or send a body that does not match its Content-Encoding. Every request is logged so
tests can assert how many downloads happened and whether Range was used.
"""
from __future__ import annotations

import hashlib
import json
import re
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
    validator: str | None = "etag"
    """What names this version: "etag" (a strong ETag), "last-modified", or None (neither is sent)."""
    honour_if_range: bool = True
    """False: a server that ignores If-Range and answers every Range with 206 of whatever it has now."""
    replace_after_drop: bytes | None = None
    """The file changes on the server (becomes these bytes) right after a connection is dropped."""
    range_offset: int = 0
    """A lying server: a 206 starts this many bytes away from the asked offset (and says so in Content-Range)."""
    redirect_to: str | None = None
    """Answer 302 to this path (itself: a redirect loop)."""
    content_encoding: str | None = None
    """Send this Content-Encoding header with the plain bytes (gzip: a body that cannot be decoded)."""
    version: int = 1

    def headers(self) -> dict[str, str]:
        if self.validator == "etag":
            return {"ETag": '"' + hashlib.sha256(self.data).hexdigest()[:16] + '"'}
        if self.validator == "last-modified":
            return {"Last-Modified": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(86400 * self.version))}
        return {}

    def pinned(self, if_range: str | None) -> bool:
        """Does an If-Range value name this version (True when none was sent or it is ignored)?"""
        return if_range is None or not self.honour_if_range or if_range in self.headers().values()

    def dropped(self) -> None:
        if self.replace_after_drop is not None:
            self.data, self.replace_after_drop = self.replace_after_drop, None
            self.version += 1


@dataclass
class Loopback:
    server: ThreadingHTTPServer
    blobs: dict[str, Blob] = field(default_factory=dict)
    log: list[tuple[str, str, str | None]] = field(default_factory=list)
    """(method, path, Range header)."""
    if_ranges: list[str | None] = field(default_factory=list)
    """The If-Range header of every GET, in order."""
    projects: dict[str, list[dict]] = field(default_factory=dict)
    """normalized project name -> the files its /simple/ page lists."""

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, path: str, data: bytes, **kw) -> str:
        self.blobs[path] = Blob(data, **kw)
        return self.url + path

    def add_wheel(self, project: str, filename: str, data: bytes, sha256: str | None = None,
                  yanked: bool | str = False, **kw) -> str:
        """Serve a wheel and list it on /simple/<project>/ with its sha256 (next to the project's other files).

        `yanked` marks the file as withdrawn (PEP 592): True, or the reason as a string.
        """
        url = self.add(f"/files/{filename}", data, **kw)
        norm = re.sub(r"[-_.]+", "-", project).lower()
        entry = {"filename": filename, "url": f"../../files/{filename}",
                 "hashes": {"sha256": sha256 or hashlib.sha256(data).hexdigest()}, "size": len(data)}
        if yanked:
            entry["yanked"] = yanked
        files = [f for f in self.projects.setdefault(norm, []) if f["filename"] != filename] + [entry]
        self.projects[norm] = files
        page = {"meta": {"api-version": "1.0"}, "name": norm, "files": files}
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

        def _empty(self, status: int, **headers: str) -> None:
            self.send_response(status)
            for k, v in {"Content-Length": "0", **headers}.items():
                self.send_header(k, v)
            self.end_headers()

        def do_GET(self) -> None:
            lb = state["lb"]
            rng = self.headers.get("Range")
            lb.log.append(("GET", self.path, rng))
            lb.if_ranges.append(self.headers.get("If-Range"))
            blob = lb.blobs.get(self.path)
            if blob is None:
                return self._empty(404)
            if blob.redirect_to is not None:
                return self._empty(302, Location=blob.redirect_to)
            data, status, start = blob.data, 200, 0
            if rng and rng.startswith("bytes=") and blob.pinned(self.headers.get("If-Range")):
                start = int(rng[6:].split("-", 1)[0] or 0)
                if start >= len(data):
                    return self._empty(416, **{"Content-Range": f"bytes */{len(data)}"})
                start = max(0, min(len(data) - 1, start + blob.range_offset))
                status = 206
            self._send(blob, data, status, start)

        def _send(self, blob: Blob, data: bytes, status: int, start: int) -> None:
            lb = state["lb"]
            body = data[start:]
            self.send_response(status)
            ctype = "application/vnd.pypi.simple.v1+json" if self.path.startswith("/simple/") else "application/octet-stream"
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in blob.headers().items():
                self.send_header(k, v)
            if blob.content_encoding:
                self.send_header("Content-Encoding", blob.content_encoding)
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
                blob.dropped()
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
