"""The LLM endpoint misbehaving: refused, TLS on a plain port, slow loris, malformed SSE, endless replies.

Real sockets on 127.0.0.1 (tests/llm/chat_completions_server.py and raw
sockets for servers that say nothing at all). Every failure must be one
LLMError with a clear message, within the configured timeout, never another
exception type.
"""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from tests.llm.chat_completions_server import ChatServer, Script, free_port
from voxcli.errors import LLMError
from voxcli.llm.openai_compat import LLMTimeouts, OpenAICompatClient

MSGS = [{"role": "user", "content": "hi"}]


def _client(url: str, **kw) -> OpenAICompatClient:
    return OpenAICompatClient(url, timeouts=LLMTimeouts(connect=1.0, first_token=kw.pop("first_token", 1.0)), **kw)


def test_refused_connection_is_one_clear_error_fast():
    url = f"http://127.0.0.1:{free_port()}/v1"
    t0 = time.monotonic()
    with pytest.raises(LLMError) as e:
        list(_client(url).stream(MSGS))
    assert "cannot reach the LLM server" in e.value.message and "connection refused" in e.value.message
    assert time.monotonic() - t0 < 3


def test_https_to_a_plain_http_port_says_tls_failed():
    with ChatServer() as srv:
        with pytest.raises(LLMError) as e:
            list(_client(srv.url.replace("http://", "https://")).stream(MSGS))
    assert "TLS handshake" in e.value.message and "http://" in (e.value.hint or "")


class _SilentServer:
    """Accepts TCP connections and then says nothing (or only the headers): a slow loris."""

    def __init__(self, send_headers: bool) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.send_headers = send_headers
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            if self.send_headers:
                c.recv(65536)
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.mark.parametrize("send_headers", [False, True], ids=["no-bytes-at-all", "headers-then-nothing"])
def test_slow_loris_times_out_at_the_configured_first_token_timeout(send_headers):
    srv = _SilentServer(send_headers)
    try:
        t0 = time.monotonic()
        with pytest.raises(LLMError) as e:
            list(_client(srv.url, first_token=1.0).stream(MSGS))
        took = time.monotonic() - t0
    finally:
        srv.close()
    assert "within 1 s" in e.value.message and srv.url in e.value.message
    assert 0.9 < took < 4.0


def test_keepalive_comments_without_tokens_still_time_out():
    with ChatServer(Script(first_token_delay=30, keepalive_comments=True)) as srv:
        t0 = time.monotonic()
        with pytest.raises(LLMError, match="within 1 s"):
            list(_client(srv.url, first_token=1.0).stream(MSGS))
        assert time.monotonic() - t0 < 4.0


MALFORMED = [
    b"data: {not json\n\n",
    b"data\n\n",
    b"data: [1, 2, 3]\n\n",
    b'data: {"choices": 5}\n\n',
    b'data: {"choices": [5, null, "x"]}\n\n',
    b'data: {"choices": [{"delta": "text"}]}\n\n',
    b'data: {"choices": [{"delta": {"content": 42}}]}\n\n',
    b'data: {"choices": [{"delta": {"content": ["a"]}}]}\n\n',
    b'data: {"usage": 7}\n\n',
    b'data: {"usage": {"prompt_tokens": "many"}}\n\n',
    b"data: \xff\xfe\xfd invalid utf-8\n\n",
    b"event: weird\nid: \x00\nretry: soon\n: comment\n\n",
    b"\r\r\n\n\r\n",
    b"data: " + b"{" * 10000 + b"\n\n",
]


@pytest.mark.parametrize("preamble", MALFORMED, ids=[f"m{i}" for i in range(len(MALFORMED))])
def test_malformed_sse_lines_are_skipped_and_the_answer_still_arrives(preamble):
    with ChatServer(Script(replies=["Paris is the capital."], preamble=preamble)) as srv:
        deltas = list(_client(srv.url).stream(MSGS))
    assert "".join(d.text for d in deltas) == "Paris is the capital."
    assert deltas[-1].is_final and "cut_off" not in deltas[-1].metrics


def test_an_event_that_never_ends_is_bounded():
    with ChatServer(Script(replies=["never seen"], preamble=b"data: " + b"x" * (3 << 20))) as srv:
        with pytest.raises(LLMError, match="malformed stream"):
            list(_client(srv.url).stream(MSGS))


def test_a_100k_token_reply_is_cut_at_max_tokens_and_the_server_sees_us_leave():
    reply = "word " * 100_000
    with ChatServer(Script(replies=[reply], token_delay=0.0)) as srv:
        t0 = time.monotonic()
        deltas = list(_client(srv.url, max_tokens=64).stream(MSGS))
        took = time.monotonic() - t0
        assert srv.records[0].body["max_tokens"] == 64  # asked for the bound ...
        assert srv.wait_for(lambda: srv.records[0].client_gone or srv.records[0].t_end is not None, 5)
        sent = srv.records[0].bytes_sent
    text = [d for d in deltas if not d.is_final]
    assert len(text) == 64  # ... and enforced it although the server ignored it
    assert deltas[-1].is_final and deltas[-1].metrics["tokens"] == 64
    assert took < 10
    assert sent < len(json.dumps(reply)) * 20  # it did not stream all 100k tokens into a reader


def test_the_client_is_reusable_after_a_bounded_reply():
    with ChatServer(Script(replies=["one two three four five six", "Short."])) as srv:
        c = _client(srv.url, max_tokens=3)
        first = "".join(d.text for d in c.stream(MSGS))
        second = "".join(d.text for d in c.stream(MSGS))
    assert first == "one two three" and second == "Short."
