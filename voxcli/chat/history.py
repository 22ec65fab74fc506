"""The conversation the LLM is shown, bounded: a chat of any length holds a bounded history.

Why bounded (issue 18): an endless `chat --input` kept every message forever,
and with the on-device model every kept token also stays resident in the KV
cache (30 layers x 2 x 3 heads x 64 floats = 46 KB per token): +33 MB in 20
minutes, growing until the model's context was full. The history is cut to a
character budget sized to what the model can use.

Why cut in steps (hysteresis): the on-device model reuses its KV cache for the
unchanged start of the prompt. Dropping one old turn per new turn would change
the start of every prompt, so every turn would prefill the whole history
again. Past `max_chars` the oldest turns go until at most `max_chars // 2`
remain; the prompt then grows from a stable start until the next cut.
"""
from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_MAX_CHARS = 24_000
"""For a server's model: about 6,000 tokens of conversation."""
LOCAL_CHARS_PER_TOKEN = 4
"""English text per SmolLM2 token, roughly (used to turn a context window into characters)."""


def budget_for(llm: object) -> int:
    """The history budget (characters) for a client: the on-device model's is a quarter of its context.

    A quarter (about 512 tokens of a 2048-token window): the prompt leaves room for the
    reply, and the KV cache's resident memory (46 KB per token) stays within ~25 MB plus the reply.
    """
    config = getattr(llm, "config", None)
    window = getattr(config, "context_window", None)
    if isinstance(window, int) and window > 0:
        return max(400, window * LOCAL_CHARS_PER_TOKEN // 4)
    return DEFAULT_MAX_CHARS


@dataclass
class History:
    """User/assistant messages, oldest first, within `max_chars` (see the module docstring)."""

    max_chars: int = DEFAULT_MAX_CHARS
    messages: list[dict[str, str]] = field(default_factory=list)
    dropped: int = 0
    """Messages dropped so far (the aggregate that remains of them)."""
    _chars: int = 0

    def __post_init__(self) -> None:
        if self.max_chars < 2:
            raise ValueError("the history budget must be at least 2 characters")
        self._chars = sum(len(m["content"]) for m in self.messages)

    def append(self, role: str, content: str) -> None:
        self.messages.append({"role": role, "content": content})
        self._chars += len(content)
        if self._chars > self.max_chars:
            self._cut(self.max_chars // 2)

    @property
    def chars(self) -> int:
        return self._chars

    def _cut(self, target: int) -> None:
        """Drop the oldest messages until at most `target` characters remain (the newest always stays)."""
        n = 0
        while n < len(self.messages) - 1 and self._chars > target:
            self._chars -= len(self.messages[n]["content"])
            n += 1
        while n < len(self.messages) - 1 and self.messages[n]["role"] == "assistant":
            self._chars -= len(self.messages[n]["content"])  # a prompt starts with the user, not a reply
            n += 1
        del self.messages[:n]
        self.dropped += n

    def __len__(self) -> int:
        return len(self.messages)

    def __iter__(self):
        return iter(self.messages)
