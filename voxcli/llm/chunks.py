"""What one chat-completions stream chunk says, read defensively.

Servers that call themselves OpenAI-compatible differ in the details (usage
in the last chunk or none, `finish_reason` on an empty delta, error objects
as strings, stray non-JSON lines), so every accessor here tolerates a
missing or mistyped field instead of raising: a malformed chunk is skipped,
not fatal. `StreamState` is what the client learns while reading one stream.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator

from voxcli.llm.guard import DEFAULT_CAP_TOKENS, ProgressWatch, ReplyBudget
from voxcli.llm.secret import StreamRedactor


@dataclass
class StreamState:
    """Progress of one streamed answer (perf_counter seconds)."""

    t0: float
    """When the request was sent."""
    index: int = 0
    """Content deltas delivered so far (not a token count: see `budget`)."""
    ttft: float | None = None
    """Seconds from t0 to the first content token (None: none yet)."""
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    """The server's token counts, when it reports them."""
    done: bool = False
    """`[DONE]` arrived, or we stopped reading at max_tokens."""
    limited: bool = False
    """We stopped at max_tokens ourselves (the server ignored it): the rest of the body is unread."""
    cut_off: bool = False
    """The connection ended before the answer did."""
    cancelled: bool = False
    budget: ReplyBudget = field(default_factory=lambda: ReplyBudget(DEFAULT_CAP_TOKENS))
    """Tokens and delta size still allowed (the client's bound, whatever the server does)."""
    redactor: StreamRedactor = field(default_factory=lambda: StreamRedactor(None))
    """Masks the API key in the content before anyone sees it."""
    watch: ProgressWatch | None = None
    """Ends the answer when no new text arrives for the progress timeout (armed at the first token)."""
    stalled: bool = False
    """The answer was cut off because the server stopped making progress."""


def parse_chunk(data: str) -> dict[str, Any] | None:
    """The JSON object of one `data:` payload; None for anything else."""
    try:
        obj = json.loads(data)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def choices(payload: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    """(content, finish_reason) of each well-formed choice; anything else a server sends is skipped."""
    items = payload.get("choices")
    if not isinstance(items, list):
        return
    for choice in items:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        reason = choice.get("finish_reason")
        yield (content if isinstance(content, str) else ""), (reason if isinstance(reason, str) else None)


def count(value: Any, default: int) -> int:
    """A token count as the server sent it (number or numeric string), else `default`."""
    try:
        return int(value) if value not in (None, "") else default
    except (TypeError, ValueError):
        return default


def error_text(obj: Any) -> str:
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
