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
  redacted from any server message we quote.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import httpx

from voxcli.errors import LLMError, UsageError
from voxcli.events import TextDelta
from voxcli.llm.base import Message, make_metrics
from voxcli.llm.sse import SSEParser

MAX_EVENT_BYTES = 1 << 20
"""A chat-completions event is a few hundred bytes; a megabyte without a line end is a broken server."""


@dataclass(frozen=True)
class LLMTimeouts:
    """Seconds; `first_token` also bounds any later stall between two reads."""

    connect: float = 5.0
    """TCP (+TLS) connect; a server that is down fails fast."""
    first_token: float = 60.0
    """Request sent -> first content token (a local server may load its model first)."""
    write: float = 10.0
    keepalive: float = 300.0
    """An idle connection is kept this long between turns (then reconnect)."""


class _Secret:
    """Holds the API key; never shows it in repr/str (tracebacks, logs, --debug)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


class _BearerAuth(httpx.Auth):
    """Adds the Authorization header per request, so the client's headers never hold the key."""

    def __init__(self, secret: _Secret) -> None:
        self._secret = secret

    def auth_flow(self, request: httpx.Request) -> Iterator[httpx.Request]:
        request.headers["Authorization"] = f"Bearer {self._secret.reveal()}"
        yield request

    def __repr__(self) -> str:
        return "<BearerAuth secret>"


def read_api_key(env_var: str | None) -> _Secret | None:
    """The key from the environment variable named by `--api-key-env` (read now, not at import)."""
    if not env_var:
        return None
    value = os.environ.get(env_var)
    if not value:
        raise UsageError(f"--api-key-env {env_var}: that environment variable is not set or empty")
    return _Secret(value.strip())


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
            auth=_BearerAuth(self._key) if self._key else None,
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
        parser = SSEParser()
        index = 0
        ttft: float | None = None
        done = False
        finish_reason: str | None = None
        usage: dict[str, Any] = {}
        cut_off = False
        limited = False
        stream = response.iter_raw()
        while not done:
            if self._cancel.is_set():
                break
            try:
                chunk = next(stream)
            except StopIteration:
                break
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.ReadTimeout) as e:
                if self._cancel.is_set():
                    break
                if ttft is None and isinstance(e, httpx.ReadTimeout):
                    raise LLMError(
                        f"no answer from the LLM server at {self.url} within {self.timeouts.first_token:g} s"
                    ) from None
                if ttft is None:
                    raise LLMError(f"the LLM server at {self.url} closed the connection before answering") from None
                cut_off = True
                break
            if ttft is None and time.perf_counter() - t0 > self.timeouts.first_token:
                # keep-alive comments arrive but no token does (slow loris)
                raise LLMError(
                    f"no answer from the LLM server at {self.url} within {self.timeouts.first_token:g} s"
                )
            events = parser.feed(chunk)
            if parser.pending > MAX_EVENT_BYTES:
                _shutdown_socket(response)
                raise LLMError(f"the LLM server at {self.url} sent a malformed stream "
                               f"(over {MAX_EVENT_BYTES} bytes without an event end)")
            for ev in events:
                if ev.data.strip() == "[DONE]":
                    done = True
                    break
                payload = _parse_chunk(ev.data)
                if payload is None:
                    continue
                if "error" in payload:
                    raise LLMError(f"the LLM server at {self.url} reported: {self._redact(_error_text(payload))}")
                if isinstance(payload.get("usage"), dict):
                    usage = payload["usage"]
                for text, reason in _choices(payload):
                    finish_reason = reason or finish_reason
                    if text:
                        if ttft is None:
                            ttft = time.perf_counter() - t0
                        yield TextDelta(text=text, index=index)
                        index += 1
                if self.max_tokens is not None and index >= self.max_tokens:
                    # The server may ignore max_tokens: stop reading at the bound ourselves.
                    limited = done = True
                    finish_reason = "length"
                    break
        cancelled = self._cancel.is_set()
        if limited:
            _shutdown_socket(response)  # do not read the rest; the connection is not reused
        elif done and not cancelled:
            # Drain the terminating chunk so the connection goes back to the pool for the next turn.
            try:
                for _ in stream:
                    pass
            except httpx.HTTPError:
                pass
        elif not cancelled and not cut_off and finish_reason is None:
            cut_off = True  # the body ended without [DONE] or a finish reason: truncated
        if cancelled:
            _shutdown_socket(response)
        prompt_tokens = _count(usage.get("prompt_tokens"), 0)
        tokens = _count(usage.get("completion_tokens"), index)
        t_first = t0 + ttft if ttft is not None else None
        metrics = make_metrics(
            t_start=t0, t_first=t_first, t_end=time.perf_counter(),
            prompt_tokens=prompt_tokens, tokens=tokens, cancelled=cancelled,
        )
        if cut_off:
            metrics["cut_off"] = 1.0
        yield TextDelta(text="", index=index, is_final=True, metrics=metrics)

    def _http_error(self, response: httpx.Response) -> LLMError:
        try:
            raw = response.read()[:4000]
        except httpx.HTTPError:
            raw = b""
        message = ""
        try:
            message = _error_text(json.loads(raw))
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
        if self._key and self._key.reveal():
            text = text.replace(self._key.reveal(), "<redacted>")
        return text


def _parse_chunk(data: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(data)
    except ValueError:
        return None  # a malformed line is skipped, not fatal
    return obj if isinstance(obj, dict) else None


def _choices(payload: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    """(content, finish_reason) of each well-formed choice; anything else a server sends is skipped."""
    choices = payload.get("choices")
    if not isinstance(choices, list):
        return
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        reason = choice.get("finish_reason")
        yield (content if isinstance(content, str) else ""), (reason if isinstance(reason, str) else None)


def _count(value: Any, default: int) -> int:
    try:
        return int(value) if value not in (None, "") else default
    except (TypeError, ValueError):
        return default


def _error_text(obj: Any) -> str:
    """The human message of an OpenAI-style error body ({"error": {"message": ...}} and variants)."""
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("detail") or json.dumps(err))
        if isinstance(err, str):
            return err
        if "detail" in obj:
            return str(obj["detail"])
    return str(obj)


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
