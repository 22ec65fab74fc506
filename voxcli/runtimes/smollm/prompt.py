"""Chat template and context-window truncation for the on-device model.

Why separate from the engine: both are pure functions of token counts, so the
policy can be unit-tested without running the model, and a reader finds the
rule in one place.

Template (SmolLM2 / ChatML): each turn is `<|im_start|>{role}\n{content}<|im_end|>\n`,
followed by `<|im_start|>assistant\n` to ask for the reply; with no system
message the model's own default system prompt is inserted (as its GGUF
chat_template does).

Truncation policy: the prompt must leave room for the reply
(budget = context - max_new_tokens). Keep the system turn and the newest
turn; drop whole turns oldest-first until the rest fits; if the newest turn
alone is still too long, keep only its last tokens (the end of a long paste is
what the user is asking about).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Final, Sequence

DEFAULT_SYSTEM: Final = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
"""SmolLM2's default system prompt, from its GGUF chat_template."""
GENERATION_PROMPT: Final = "<|im_start|>assistant\n"


def render_turn(role: str, content: str) -> str:
    return f"<|im_start|>{role}\n{content}<|im_end|>\n"


@dataclass(frozen=True)
class FittedPrompt:
    """The token ids sent to the model and what truncation did to get there."""

    ids: list[int]
    dropped_turns: int
    """Whole turns removed, oldest first (system never counted)."""
    clipped_tokens: int
    """Tokens cut from the start of the newest turn when it alone was too long."""
    kept_roles: list[str]


def fit_messages(
    messages: Sequence[dict],
    encode: Callable[[str], list[int]],
    budget: int,
    *,
    default_system: str | None = DEFAULT_SYSTEM,
) -> FittedPrompt:
    """Template `messages` into at most `budget` ids with the policy above."""
    from voxcli.errors import UsageError

    if not messages:
        raise UsageError("no messages to send to the model")
    for m in messages:
        if m.get("role") not in ("system", "user", "assistant") or not isinstance(m.get("content"), str):
            raise UsageError(f"bad chat message {m!r}: need role system|user|assistant and text content")
    msgs = list(messages)
    system = msgs.pop(0) if msgs[0]["role"] == "system" else None
    if system is None and default_system is not None:
        system = {"role": "system", "content": default_system}
    sys_ids = encode(render_turn(system["role"], system["content"])) if system else []
    tail_ids = encode(GENERATION_PROMPT)
    turns = [encode(render_turn(m["role"], m["content"])) for m in msgs]
    roles = [m["role"] for m in msgs]
    room = budget - len(sys_ids) - len(tail_ids)
    if room <= 8:
        raise UsageError(
            f"the system prompt ({len(sys_ids)} tokens) leaves no room in a {budget}-token prompt budget"
        )
    # walk back from the newest turn, keeping whole turns while they fit
    kept: list[list[int]] = []
    used = 0
    for ids in reversed(turns):
        if used + len(ids) > room:
            break
        kept.append(ids)
        used += len(ids)
    kept.reverse()
    clipped = 0
    if not kept and turns:  # the newest turn alone is too long: keep its end
        newest = turns[-1]
        head = encode(f"<|im_start|>{roles[-1]}\n")
        body = newest[len(head) :]
        keep_body = room - len(head)
        clipped = len(body) - keep_body
        kept = [head + body[-keep_body:]]
    dropped = len(turns) - len(kept)
    ids = sys_ids + [t for turn in kept for t in turn] + tail_ids
    kept_roles = ([system["role"]] if system else []) + roles[dropped:]
    return FittedPrompt(ids=ids, dropped_turns=dropped, clipped_tokens=clipped, kept_roles=kept_roles)
