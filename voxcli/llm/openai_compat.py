"""Streaming chat-completions client for any OpenAI-compatible server.

llama.cpp's server, Ollama, vLLM and hosted APIs all speak the same protocol:
POST `{base}/chat/completions` with `"stream": true` answers with server-sent
events whose `data:` is a JSON chunk carrying `choices[0].delta.content`, and
a final `data: [DONE]`. We turn that into `TextDelta`s as the bytes arrive so
the TTS can start speaking the first clause while the model still writes.

Why these choices:
- One `httpx.Client` for the whole conversation: its keep-alive pool reuses
  the TCP (and TLS) connection across turns, which saves a round trip per
  turn on a remote server.
- `cancel()` may be called from another thread (barge-in, Ctrl-C): it shuts
  the socket down, which wakes a `recv` blocked in the streaming thread at
  once (a plain close would not), and the server sees the connection end, so
  it stops generating.
- A connection lost mid-answer is not an exception: the caller has already
  spoken part of the answer, so we end the stream with a final delta whose
  `metrics["cut_off"] == 1.0` and let the agent say so.
- The API key is read from the environment variable the user names, kept in
  an object whose repr is masked, sent only in the Authorization header, and
  redacted (`voxcli.llm.secret`) from everything the server says that we pass
  on: the streamed answer as well as quoted error messages, because a proxy
  may echo the headers back.
- No answer is endless (`voxcli.llm.guard`): no new text for
  `timeouts.progress` seconds ends it as cut off (keep-alive bytes do not
  count), and `max_tokens` is counted in characters / 4, not deltas, with one
  delta capped, so a server that ignores the bound or sends one giant delta
  cannot make the voice talk for minutes.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import httpx

from voxcli.errors import LLMError, UsageError
from voxcli.events import TextDelta
from voxcli.llm.base import Message, make_metrics
from voxcli.llm.chunks import StreamState, choices, count, error_text, parse_chunk
from voxcli.llm.guard import DEFAULT_CAP_TOKENS, ProgressWatch, ReplyBudget
from voxcli.llm.secret import BearerAuth, StreamRedactor, read_api_key, redact
from voxcli.llm.sse import SSEParser, SSEvent

MAX_EVENT_BYTES = 1 << 20
"""A chat-completions event is a few hundred bytes; a megabyte without a line end is a broken server."""


@dataclass(frozen=True)
class LLMTimeouts:
    """Seconds; `first_token` also bounds any later stall between two reads (`progress` ends it sooner)."""

    connect: float = 5.0
    """TCP (+TLS) connect; a server that is down fails fast."""
    first_token: float = 60.0
    """Request sent -> first content token (a local server may load its model first)."""
    progress: float = 20.0
    """After the first token: no new text for this long ends the answer as cut off.

    Keep-alive comments, empty or blank deltas and silence do not count as progress.
    """
    write: float = 10.0
    keepalive: float = 300.0
    """An idle connection is kept this long between turns (then reconnect)."""


class OpenAICompatClient:
    """`stream(messages) -> Iterator[TextDelta]` against `{base_url}/chat/completions`.

    Not safe for two concurrent streams; one conversation, one stream at a time.
    `cancel()` is the only method meant to be called from another thread.
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key_env: str | None = None,
        timeouts: LLMTimeouts | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url or "://" not in base_url:
            raise UsageError(f"--llm-url {base_url!r}: expected a URL such as http://127.0.0.1:8080/v1")
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.model = model or "default"
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.timeouts = timeouts or LLMTimeouts()
        self._key = read_api_key(api_key_env)
        t = self.timeouts
        self._client = httpx.Client(
            auth=BearerAuth(self._key) if self._key else None,
            timeout=httpx.Timeout(connect=t.connect, read=t.first_token, write=t.write, pool=t.connect),
            transport=transport,
            headers={"Accept": "text/event-stream"},
            # Turns are often more than httpx's default 5 s apart; keep the connection for the conversation.
            limits=httpx.Limits(max_connections=4, max_keepalive_connections=1, keepalive_expiry=self.timeouts.keepalive),
        )
        self._lock = threading.Lock()
        self._response: httpx.Response | None = None
        self._cancel = threading.Event()

    def __repr__(self) -> str:
        return f"OpenAICompatClient(url={self.url!r}, model={self.model!r}, key={'set' if self._key else 'none'})"

    @property
    def name(self) -> str:
        return f"{self.model} @ {self.base_url}"

    # -- public API ---------------------------------------------------------------

    def stream(self, messages: Sequence[Message] | Sequence[dict]) -> Iterator[TextDelta]:
        """Yield content deltas as they arrive, then one final delta with metrics.

        The final delta has `is_final=True`, empty text, and `metrics` with
        `base.METRIC_KEYS` (prompt_tokens is 0 when the server reports no
        usage) plus `cut_off` = 1.0 when the connection ended before the
        answer did and `cancelled` = 1.0 after `cancel()`.
        Raises LLMError before the first token (server down, HTTP error, no
        first token within `timeouts.first_token`).
        """
        self._cancel.clear()
        body: dict[str, Any] = {"model": self.model, "messages": list(messages), "stream": True}
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        t0 = time.perf_counter()
        try:
            request = self._client.build_request("POST", self.url, json=body)
            response = self._client.send(request, stream=True)
        except httpx.ConnectError as e:
            if _is_tls_failure(e):
                raise LLMError(
                    f"TLS handshake with the LLM server at {self.url} failed ({_reason(e)})",
                    hint="if the server speaks plain HTTP use an http:// URL; otherwise check its certificate "
                         "(SSL_CERT_FILE names extra CA certificates)",
                ) from None
            raise LLMError(
                f"cannot reach the LLM server at {self.url} ({_reason(e)})",
                hint="start the server, or point --llm-url at a running OpenAI-compatible server",
            ) from None
        except httpx.TimeoutException:
            raise LLMError(
                f"the LLM server at {self.url} did not answer within {self.timeouts.first_token:g} s",
            ) from None
        except httpx.HTTPError as e:
            raise LLMError(f"LLM request to {self.url} failed: {self._redact(_reason(e))}") from None
        with self._lock:
            self._response = response
        try:
            if response.status_code >= 400:
                raise self._http_error(response)
            yield from self._read_events(response, t0)
        finally:
            with self._lock:
                self._response = None
            response.close()

    def cancel(self) -> None:
        """Stop the current stream at once (thread-safe); the stream ends with a final delta."""
        self._cancel.set()
        with self._lock:
            response = self._response
        if response is not None:
            _shutdown_socket(response)

    def close(self) -> None:
        self.cancel()
        self._client.close()

    def __enter__(self) -> "OpenAICompatClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------

    def _read_events(self, response: httpx.Response, t0: float) -> Iterator[TextDelta]:
        """Content deltas as the body arrives, then the final delta with the metrics (see `stream`)."""
        watch = ProgressWatch(self.timeouts.progress, lambda: _shutdown_socket(response))
        st = StreamState(t0, budget=ReplyBudget(self.max_tokens or DEFAULT_CAP_TOKENS),
                         redactor=StreamRedactor(self._key.reveal() if self._key else None), watch=watch)
        parser = SSEParser()
        raw = response.iter_raw()
        try:
            while not st.done and not self._cancel.is_set():
                chunk = self._next_chunk(raw, st)
                if chunk is None:
                    break
                events = parser.feed(chunk)
                if parser.pending > MAX_EVENT_BYTES:
                    _shutdown_socket(response)
                    raise LLMError(f"the LLM server at {self.url} sent a malformed stream "
                                   f"(over {MAX_EVENT_BYTES} bytes without an event end)")
                yield from self._deltas(events, st)
            self._end_body(response, raw, st)
        finally:
            watch.stop()
        if watch.stalled and not st.done and not st.cancelled:
            st.cut_off = st.stalled = True  # the watch shut the socket: no new text for `progress` s
        tail = st.redactor.flush()
        if tail:
            yield TextDelta(text=tail, index=st.index)
            st.index += 1
        yield self._final_delta(st)

    def _next_chunk(self, raw: Iterator[bytes], st: StreamState) -> bytes | None:
        """The next bytes of the body; None at its end or when it broke after the first token."""
        try:
            chunk = next(raw)
        except StopIteration:
            return None
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.ReadTimeout) as e:
            if self._cancel.is_set():
                return None
            if st.ttft is None and isinstance(e, httpx.ReadTimeout):
                raise self._no_answer() from None
            if st.ttft is None:
                raise LLMError(f"the LLM server at {self.url} closed the connection before answering") from None
            st.cut_off = True  # part of the answer was spoken already: end it, do not raise
            return None
        if st.ttft is None and time.perf_counter() - st.t0 > self.timeouts.first_token:
            raise self._no_answer()  # keep-alive comments arrive but no token does (slow loris)
        return chunk

    def _no_answer(self) -> LLMError:
        return LLMError(f"no answer from the LLM server at {self.url} within {self.timeouts.first_token:g} s")

    def _deltas(self, events: list[SSEvent], st: StreamState) -> Iterator[TextDelta]:
        """The content deltas of parsed events; marks `[DONE]`, usage, finish reason and max_tokens in `st`."""
        for ev in events:
            if ev.data.strip() == "[DONE]":
                st.done = True
                return
            payload = parse_chunk(ev.data)
            if payload is None:
                continue
            if "error" in payload:
                raise LLMError(f"the LLM server at {self.url} reported: {self._redact(error_text(payload))}")
            if isinstance(payload.get("usage"), dict):
                st.usage = payload["usage"]
                st.budget.reported = count(st.usage.get("completion_tokens"), 0)
            for text, reason in choices(payload):
                st.finish_reason = reason or st.finish_reason
                if text:
                    yield from self._deliver(text, st)
                if st.budget.stop:
                    # The server may ignore max_tokens or send a giant delta: stop reading ourselves.
                    st.limited = st.done = True
                    st.cut_off = st.cut_off or st.budget.stop == "oversized"
                    st.finish_reason = "length"
                    return

    @staticmethod
    def _deliver(text: str, st: StreamState) -> Iterator[TextDelta]:
        """Pass `text` on within the budget and with the key masked; only new words count as progress."""
        text = st.budget.take(text)
        if st.ttft is None:
            st.ttft = time.perf_counter() - st.t0
            if st.watch is not None:
                st.watch.start()  # from here on the progress timeout applies, not the first-token one
        elif st.watch is not None and text.strip():
            st.watch.progress()
        safe = st.redactor.feed(text)
        if safe:
            yield TextDelta(text=safe, index=st.index)
            st.index += 1

    def _end_body(self, response: httpx.Response, raw: Iterator[bytes], st: StreamState) -> None:
        """Leave the connection reusable after a complete answer; close it after anything else."""
        st.cancelled = self._cancel.is_set()
        if st.limited:
            _shutdown_socket(response)  # do not read the rest; the connection is not reused
        elif st.done and not st.cancelled:
            # Drain the terminating chunk so the connection goes back to the pool for the next turn.
            # Bounded: a server that keeps sending after [DONE] is cut by the progress watch or the size.
            drained = 0
            try:
                for piece in raw:
                    drained += len(piece)
                    if drained > MAX_EVENT_BYTES:
                        _shutdown_socket(response)
                        break
            except httpx.HTTPError:
                pass
        elif not st.cancelled and not st.cut_off and st.finish_reason is None:
            st.cut_off = True  # the body ended without [DONE] or a finish reason: truncated
        if st.cancelled:
            _shutdown_socket(response)

    @staticmethod
    def _final_delta(st: StreamState) -> TextDelta:
        """The last delta: timing and token counts (the server's when it reported usage, else ours).

        Extra keys: `cut_off`, `stalled` (+ `progress_s`, the timeout) and `oversized` say why an answer
        ended early; `tokens_estimated` = 1.0 says `tokens` is characters / 4, not the server's count.
        """
        estimated = count(st.usage.get("completion_tokens"), -1) < 0
        metrics = make_metrics(
            t_start=st.t0, t_first=st.t0 + st.ttft if st.ttft is not None else None, t_end=time.perf_counter(),
            prompt_tokens=count(st.usage.get("prompt_tokens"), 0),
            tokens=round(st.budget.estimated) if estimated else count(st.usage.get("completion_tokens"), 0),
            cancelled=st.cancelled,
        )
        flags = {"cut_off": st.cut_off, "stalled": st.stalled, "oversized": st.budget.stop == "oversized",
                 "tokens_estimated": estimated}
        metrics.update({k: 1.0 for k, on in flags.items() if on})
        if st.stalled and st.watch is not None:
            metrics["progress_s"] = st.watch.timeout
        return TextDelta(text="", index=st.index, is_final=True, metrics=metrics)

    def _http_error(self, response: httpx.Response) -> LLMError:
        try:
            raw = response.read()[:4000]
        except httpx.HTTPError:
            raw = b""
        message = ""
        try:
            message = error_text(json.loads(raw))
        except (ValueError, AttributeError, TypeError):
            message = raw.decode("utf-8", errors="replace").strip()
        message = " ".join(self._redact(message).split())[:300]
        status = f"HTTP {response.status_code} {response.reason_phrase}".strip()
        hint = None
        if response.status_code in (401, 403):
            hint = "check the API key (--api-key-env names the environment variable that holds it)"
        elif response.status_code == 429:
            hint = "the server is rate limiting; wait and retry"
        elif response.status_code == 404:
            hint = "check --llm-url (it should end before /chat/completions, e.g. http://127.0.0.1:8080/v1)"
        text = f"the LLM server at {self.url} answered {status}" + (f": {message}" if message else "")
        return LLMError(text, hint=hint)

    def _redact(self, text: str) -> str:
        return redact(text, self._key.reveal() if self._key else None)


def _reason(e: Exception) -> str:
    text = str(e) or type(e).__name__
    if "Connection refused" in text:
        return "connection refused"
    return text


def _is_tls_failure(e: BaseException) -> bool:
    import ssl

    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return "SSL" in str(e) or "certificate" in str(e).lower()


def _shutdown_socket(response: httpx.Response) -> None:
    """Wake a reader blocked in recv() and tell the server we are gone."""
    stream = response.extensions.get("network_stream")
    sock = None
    if stream is not None:
        try:
            sock = stream.get_extra_info("socket")
        except Exception:  # noqa: BLE001 - transport without a socket
            sock = None
    if isinstance(sock, socket.socket):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
