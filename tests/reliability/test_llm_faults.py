"""The LLM endpoint misbehaving: refused, TLS on a plain port, slow loris, malformed SSE, endless replies,
a server that stops making progress after the first token, one giant delta.

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
from voxcli.llm.guard import CHARS_PER_TOKEN, DEFAULT_CAP_TOKENS, MAX_DELTA_CHARS, WORD_SLACK
from voxcli.llm.openai_compat import LLMTimeouts, OpenAICompatClient

MSGS = [{"role": "user", "content": "hi"}]


def _client(url: str, **kw) -> OpenAICompatClient:
    timeouts = LLMTimeouts(connect=1.0, first_token=kw.pop("first_token", 1.0), progress=kw.pop("progress", 20.0))
    return OpenAICompatClient(url, timeouts=timeouts, **kw)


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
    text = "".join(d.text for d in deltas)
    # ... and enforced it although the server ignored it: 64 tokens of ~4 characters, the last word finished
    assert 60 * CHARS_PER_TOKEN <= len(text) <= 64 * CHARS_PER_TOKEN + WORD_SLACK
    m = deltas[-1].metrics
    assert deltas[-1].is_final and 60 <= m["tokens"] <= 65 and m["tokens_estimated"] == 1.0
    assert "cut_off" not in m  # a bounded answer is not a broken one
    assert took < 10
    assert sent < len(json.dumps(reply)) * 20  # it did not stream all 100k tokens into a reader


def test_without_max_tokens_an_endless_reply_still_stops_at_the_default_cap():
    with ChatServer(Script(replies=["word " * 100_000])) as srv:
        deltas = list(_client(srv.url).stream(MSGS))
        assert "max_tokens" not in srv.records[0].body  # the server's own limit is not overridden ...
    text = "".join(d.text for d in deltas)
    assert len(text) <= DEFAULT_CAP_TOKENS * CHARS_PER_TOKEN + WORD_SLACK  # ... but we stop reading
    assert deltas[-1].metrics["tokens"] <= DEFAULT_CAP_TOKENS + 1


def test_the_client_is_reusable_after_a_bounded_reply():
    with ChatServer(Script(replies=["one two three four five six", "Short."])) as srv:
        c = _client(srv.url, max_tokens=3)
        first = "".join(d.text for d in c.stream(MSGS))
        second = "".join(d.text for d in c.stream(MSGS))
    assert first == "one two three" and second == "Short."


@pytest.mark.parametrize("mode", ["comments", "empty_deltas", "blank_deltas", "silence"])
def test_a_server_that_stops_making_progress_is_cut_off_at_the_progress_timeout(mode):
    """First tokens, then keep-alive bytes (or nothing) forever: the turn ends after `progress` s, not never."""
    with ChatServer(Script(replies=["Paris is the capital of France."], stall_after=3, stall_mode=mode)) as srv:
        t0 = time.monotonic()
        deltas = list(_client(srv.url, progress=1.0, first_token=30.0).stream(MSGS))
        took = time.monotonic() - t0
        assert srv.wait_for(lambda: srv.records[0].t_end is not None, 5)  # the server saw us leave
        assert srv.records[0].client_gone
    assert "".join(d.text for d in deltas).strip() == "Paris is the"
    m = deltas[-1].metrics
    assert deltas[-1].is_final and m["cut_off"] == 1.0 and m["stalled"] == 1.0 and m["progress_s"] == 1.0
    assert 0.9 < took < 4.0


def test_blank_deltas_from_the_very_start_are_cut_off_too():
    """A lone space counts as the first token (so the first-token timeout no longer applies), never as progress."""
    with ChatServer(Script(replies=["never said"], stall_after=0, stall_mode="blank_deltas")) as srv:
        t0 = time.monotonic()
        deltas = list(_client(srv.url, progress=1.0, first_token=30.0).stream(MSGS))
        took = time.monotonic() - t0
    assert "".join(d.text for d in deltas).strip() == ""
    assert deltas[-1].metrics["stalled"] == 1.0 and 0.9 < took < 4.0


def test_the_progress_timeout_does_not_cut_a_slow_but_steady_answer():
    with ChatServer(Script(replies=["one two three four five six seven"], token_delay=0.3)) as srv:
        deltas = list(_client(srv.url, progress=1.0).stream(MSGS))
    assert "".join(d.text for d in deltas) == "one two three four five six seven"
    assert "cut_off" not in deltas[-1].metrics and "stalled" not in deltas[-1].metrics


@pytest.mark.parametrize("max_tokens", [None, 64])
def test_one_giant_delta_is_capped_and_the_answer_ends_there(max_tokens):
    """900 KB in one delta (a server ignoring max_tokens, or a buffering proxy): minutes of speech before."""
    with ChatServer(Script(replies=["word " * 180_000], one_delta=True)) as srv:
        c = _client(srv.url, max_tokens=max_tokens)
        deltas = list(c.stream(MSGS))
    text = "".join(d.text for d in deltas)
    bound = MAX_DELTA_CHARS if max_tokens is None else max_tokens * CHARS_PER_TOKEN + WORD_SLACK
    assert 0 < len(text) <= bound and text.startswith("word word")
    m = deltas[-1].metrics
    assert m["cut_off"] == 1.0 and m["oversized"] == 1.0 and m["tokens"] <= bound / CHARS_PER_TOKEN + 1
