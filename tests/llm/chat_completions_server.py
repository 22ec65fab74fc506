"""A real HTTP server on 127.0.0.1 that speaks the chat-completions streaming protocol.

Used by the LLM client, agent and `voxcli chat` tests instead of a mocked
client: the bytes cross a real socket, with HTTP/1.1 keep-alive and chunked
transfer encoding as llama.cpp's server sends them. Behaviour is scripted per
server (replies, first-token delay, per-token delay, drop after N body bytes,
error statuses, and hostile modes: stalling after N tokens with keep-alive
comments, empty deltas, blank deltas or silence; the whole reply in one
delta; echoing a request header into the reply) and every request and connection is recorded so tests can
assert what the client did (reuse, cancellation, headers).
"""
from __future__ import annotations

import json
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Literal

StallMode = Literal["comments", "empty_deltas", "blank_deltas", "silence"]
STALL_LIMIT_S = 120.0
"""A stalling handler gives up after this long even if the client never leaves (a failing test)."""


@dataclass
class Script:
    """What the server does with the next requests (mutable between turns)."""

    replies: list[str] = field(default_factory=lambda: ["Hello there. How can I help?"])
    """Replies in order; the last one repeats. Ignored when `reply_fn` is set."""
    reply_fn: Callable[[list[dict]], str] | None = None
    first_token_delay: float = 0.0
    token_delay: float = 0.0
    drop_after_bytes: int | None = None
    """Close the socket abruptly after this many bytes of SSE body (mid-answer)."""
    status: int = 200
    error_message: str = "boom"
    keepalive_comments: bool = False
    """Send `: keep-alive` comments during the first-token delay."""
    usage: bool = True
    preamble: bytes = b""
    """Raw SSE bytes sent before the first token (malformed-line tests)."""
    stall_after: int | None = None
    """After this many tokens, never send another word: keep the connection busy with `stall_mode`."""
    stall_mode: StallMode = "comments"
    """comments: `: keep-alive` lines; empty_deltas: `{"delta": {"content": ""}}` events;
    blank_deltas: deltas of one space; silence: no bytes at all (all every 50 ms, until the client leaves)."""
    one_delta: bool = False
    """Send the whole reply as a single delta (a proxy that buffers, or a hostile server)."""
    echo_header: str | None = None
    """Append `<header>: <value>` of this request header to the reply (a proxy echoing the headers)."""


@dataclass
class Record:
    path: str
    headers: dict[str, str]
    body: dict
    client_port: int
    t_start: float
    t_end: float | None = None
    bytes_sent: int = 0
    client_gone: bool = False
    """The client closed the connection while we were still streaming."""


def _delta_event(model: str, content: str) -> bytes:
    """One SSE event carrying `content` as a chat-completions delta."""
    chunk = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "model": model,
             "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


def tokens_of(text: str) -> list[str]:
    """Split like a BPE tokenizer roughly would: words with their leading space, punctuation apart."""
    return re.findall(r"\s*[\w']+|\s*[^\w\s]|\s+", text)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "ChatServer._Server"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet tests
        pass

    def do_POST(self) -> None:  # noqa: N802
        owner: ChatServer = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        rec = Record(
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            client_port=self.client_address[1],
            t_start=time.monotonic(),
        )
        owner.records.append(rec)
        script = owner.script
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        if script.status != 200:
            self._json(script.status, {"error": {"message": script.error_message, "type": "test"}})
            return
        reply = script.reply_fn(body.get("messages", [])) if script.reply_fn else owner.next_reply()
        if script.echo_header:
            reply += f" {script.echo_header}: {self.headers.get(script.echo_header, '')}"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self._stream(rec, script, reply, body)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            rec.client_gone = True
            self.close_connection = True
        rec.t_end = time.monotonic()

    def _stream(self, rec: Record, script: Script, reply: str, body: dict) -> None:
        model = body.get("model", "test")
        deadline = time.monotonic() + script.first_token_delay
        while time.monotonic() < deadline:
            if script.keepalive_comments:
                self._chunk(rec, script, b": keep-alive\n\n")
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
            self._check_client(rec)
        if script.preamble and not self._chunk(rec, script, script.preamble):
            return
        toks = [reply] if script.one_delta else tokens_of(reply)
        for i, tok in enumerate(toks):
            if i == script.stall_after:
                self._stall(rec, script, model)
                return
            if i and script.token_delay:
                time.sleep(script.token_delay)
                self._check_client(rec)
            if not self._chunk(rec, script, _delta_event(model, tok)):
                return
        final = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "model": model,
                 "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        if script.usage:
            final["usage"] = {"prompt_tokens": 17, "completion_tokens": len(toks), "total_tokens": 17 + len(toks)}
        if not self._chunk(rec, script, f"data: {json.dumps(final)}\n\n".encode()):
            return
        if not self._chunk(rec, script, b"data: [DONE]\n\n"):
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _stall(self, rec: Record, script: Script, model: str) -> None:
        """Keep the connection alive without another word, until the client leaves (or STALL_LIMIT_S)."""
        filler = {"comments": b": keep-alive\n\n", "empty_deltas": _delta_event(model, ""),
                  "blank_deltas": _delta_event(model, " "), "silence": b""}[script.stall_mode]
        end = time.monotonic() + STALL_LIMIT_S
        while time.monotonic() < end:
            if filler and not self._chunk(rec, script, filler):
                return
            time.sleep(0.05)
            self._check_client(rec)

    def _check_client(self, rec: Record) -> None:
        """Detect a client that hung up (recv returns b'' on a closed peer)."""
        sock = self.connection
        sock.setblocking(False)
        try:
            data = sock.recv(1, socket.MSG_PEEK)
            if data == b"":
                raise ConnectionResetError("client closed")
        except BlockingIOError:
            pass
        finally:
            sock.setblocking(True)

    def _chunk(self, rec: Record, script: Script, data: bytes) -> bool:
        """Write one chunked-encoding frame; returns False after an abrupt drop."""
        if script.drop_after_bytes is not None and rec.bytes_sent + len(data) > script.drop_after_bytes:
            part = data[: max(0, script.drop_after_bytes - rec.bytes_sent)]
            if part:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
                rec.bytes_sent += len(part)
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return False
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()
        rec.bytes_sent += len(data)
        return True

    def _json(self, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ChatServer:
    """`with ChatServer() as srv:` ... `srv.url` is the base URL ending in /v1."""

    class _Server(ThreadingHTTPServer):
        daemon_threads = True
        allow_reuse_address = True
        owner: "ChatServer"

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self.records: list[Record] = []
        self._reply_i = 0
        self._srv = self._Server(("127.0.0.1", 0), _Handler)
        self._srv.owner = self
        self.port = self._srv.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def next_reply(self) -> str:
        replies = self.script.replies
        r = replies[min(self._reply_i, len(replies) - 1)]
        self._reply_i += 1
        return r

    def start(self) -> "ChatServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._srv.shutdown()
        self._srv.server_close()

    def __enter__(self) -> "ChatServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_for(self, pred: Callable[[], bool], timeout: float = 5.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred():
                return True
            time.sleep(0.01)
        return pred()


def free_port() -> int:
    """A port nothing listens on (for the server-down test)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
