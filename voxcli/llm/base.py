"""The one interface every language model behind `voxcli chat` implements.

Why a Protocol and not a base class: the OpenAI-compatible HTTP client and the
on-device SmolLM2 engine share no code, only a contract -- the chat loop calls
`stream(messages)` and reads `TextDelta`s until one has `is_final=True`, and
may call `cancel()` from another thread (barge-in, Ctrl-C). Structural typing
lets either be swapped in (or a scripted fake in tests) without inheritance.

Contract of `stream`:
- yields `TextDelta(text, index, is_final=False)` pieces as they are decoded
  (`index` counts deltas from 0), then exactly one final delta with
  `is_final=True`, empty (or trailing) text, and `metrics` filled with the
  keys in `METRIC_KEYS`;
- after `cancel()` the generator stops at the next token boundary and still
  yields the final delta (with `metrics["cancelled"] = 1.0`), so consumers
  never wait for a sentinel that does not come;
- raises `voxcli.errors.LLMError` (or a subclass of `VoxError`) on failure.
"""
from __future__ import annotations

from typing import Final, Iterator, Literal, Protocol, TypedDict, runtime_checkable

from voxcli.events import TextDelta

Role = Literal["system", "user", "assistant"]


class Message(TypedDict):
    """One chat turn, in the OpenAI chat-completions shape both clients accept."""

    role: Role
    content: str


METRIC_KEYS: Final = ("ttft_s", "prompt_tokens", "tokens", "tokens_per_s", "total_s")
"""Keys the final delta's `metrics` carries (see DESIGN.md, LLM chunk metrics).

ttft_s: `stream()` call to the first generated token (prefill included); prompt_tokens: tokens
sent as the prompt (after truncation); tokens: tokens generated; tokens_per_s:
generated tokens / decode time (after the first token); total_s: call to final.
"""


@runtime_checkable
class LLMClient(Protocol):
    """A streaming chat model: text deltas out, cancellable between tokens."""

    def stream(self, messages: list[Message] | list[dict]) -> Iterator[TextDelta]:
        """Generate the assistant's reply to `messages`, piece by piece."""
        ...

    def cancel(self) -> None:
        """Ask the running `stream` to stop at the next token; thread-safe, idempotent."""
        ...


def make_metrics(
    *,
    t_start: float,
    t_first: float | None,
    t_end: float,
    prompt_tokens: int,
    tokens: int,
    cancelled: bool = False,
) -> dict[str, float]:
    """Build the final delta's metrics from perf_counter timestamps.

    tokens/s is measured over the decode phase (first token to end) so the
    prefill does not dilute it; with one token or none it falls back to total.
    """
    total = max(t_end - t_start, 0.0)
    ttft = (t_first - t_start) if t_first is not None else total
    decode_s = (t_end - t_first) if t_first is not None else 0.0
    if tokens > 1 and decode_s > 0:
        tps = (tokens - 1) / decode_s
    else:
        tps = tokens / total if total > 0 else 0.0
    out = {
        "ttft_s": float(ttft),
        "prompt_tokens": float(prompt_tokens),
        "tokens": float(tokens),
        "tokens_per_s": float(tps),
        "total_s": float(total),
    }
    if cancelled:
        out["cancelled"] = 1.0
    return out


def paced_metrics(metrics: dict[str, float], waited_s: float) -> dict[str, float]:
    """`metrics` of a stream whose reader paused `waited_s` between deltas (chat's TTS push-back).

    The generator's clock ran while the reader waited, so tokens/s is taken over the decode time
    minus the wait (the model's speed, not the speech's); `paced_s` says how long it waited.
    """
    out = dict(metrics)
    if waited_s <= 0.0:
        return out
    out["paced_s"] = float(waited_s)
    tokens = out.get("tokens", 0.0)
    decode_s = out.get("total_s", 0.0) - out.get("ttft_s", 0.0) - waited_s
    if tokens > 1 and decode_s > 0:
        out["tokens_per_s"] = float((tokens - 1) / decode_s)
    return out
