"""The API key of an LLM server: held masked, sent in one header, redacted from what the server says.

`Secret` keeps the key out of reprs, tracebacks and `--debug` dumps;
`BearerAuth` adds it to each request so the client's own headers never hold
it; `read_api_key` reads it from the environment variable the user names.

Why redaction too: a misconfigured proxy may echo the request headers back, into an error
body or into the answer itself, and everything the server says ends up
somewhere the user or a log reader sees it (stderr, `--json` stdout, the
turn log, the conversation history sent back on the next turn). The client
applies `redact` to every server text it passes on -- error messages and
streamed content alike -- so no consumer has to remember to.

Streamed content arrives in pieces, and a key can be split across two
deltas ("sk-abc" + "def..."), which a per-piece `str.replace` would miss.
`StreamRedactor` holds back the end of the text seen so far whenever it
could be the beginning of the key, and releases it once the next piece
shows it was not.
"""
from __future__ import annotations

import os
from typing import Final, Iterator

import httpx

from voxcli.errors import UsageError

MASK: Final = "<redacted>"
"""What the key is replaced with (also in tests and docs)."""

MIN_PARTIAL: Final = 8
"""A key prefix this long (or the whole key, if shorter) left at the end of a stream is masked too:
a proxy that truncates the echo must not leak most of the key. Shorter tails ("s", "sk-") are
ordinary text and are released."""


class Secret:
    """Holds the API key; never shows it in repr/str (tracebacks, logs, --debug)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


class BearerAuth(httpx.Auth):
    """Adds the Authorization header per request, so the client's headers never hold the key."""

    def __init__(self, secret: Secret) -> None:
        self._secret = secret

    def auth_flow(self, request: httpx.Request) -> Iterator[httpx.Request]:
        request.headers["Authorization"] = f"Bearer {self._secret.reveal()}"
        yield request

    def __repr__(self) -> str:
        return "<BearerAuth secret>"


def read_api_key(env_var: str | None) -> Secret | None:
    """The key from the environment variable named by `--api-key-env` (read now, not at import)."""
    if not env_var:
        return None
    value = os.environ.get(env_var)
    if not value:
        raise UsageError(f"--api-key-env {env_var}: that environment variable is not set or empty")
    return Secret(value.strip())


def redact(text: str, secret: str | None) -> str:
    """`text` with every occurrence of `secret` replaced by `MASK` (unchanged without a secret)."""
    if not secret or secret not in text:
        return text
    return text.replace(secret, MASK)


class StreamRedactor:
    """Redacts a secret from text that arrives in pieces; `feed` each piece, `flush` at the end."""

    def __init__(self, secret: str | None) -> None:
        self._secret = secret or ""
        self._held = ""

    def feed(self, piece: str) -> str:
        """The part of `held + piece` that is safe to pass on now (the rest waits for the next piece)."""
        if not self._secret:
            return piece
        text = redact(self._held + piece, self._secret)
        keep = _prefix_overlap(text, self._secret)
        self._held = text[len(text) - keep:] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """What is still held back at the end of the stream (masked when it is a long key prefix)."""
        held, self._held = self._held, ""
        if held and len(held) >= min(MIN_PARTIAL, len(self._secret)):
            return MASK
        return held


def _prefix_overlap(text: str, secret: str) -> int:
    """Length of the longest end of `text` that is a proper prefix of `secret` (0: none)."""
    start = max(0, len(text) - len(secret) + 1)
    i = text.find(secret[0], start)
    while i >= 0:
        if secret.startswith(text[i:]):
            return len(text) - i
        i = text.find(secret[0], i + 1)
    return 0
