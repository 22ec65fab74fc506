"""LocalClient: the on-device model (`voxcli.runtimes.smollm`) as an `LLMClient`.

Why a separate adapter: the runtime turns messages into token ids and knows
nothing of the client contract; this class adds what every `LLMClient` owes
the chat loop (see `voxcli.llm.base`): text deltas that never split a
character, exactly one final delta with the metrics, and `cancel()`.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

from voxcli.errors import ModelNotFoundError
from voxcli.events import TextDelta
from voxcli.llm.base import make_metrics
from voxcli.runtimes.smollm.local import DEFAULT_MODEL, GGUF_FILE, Generation, LocalLLM, LocalLLMConfig

__all__ = ["LocalClient", "LocalLLMConfig", "load_local_llm"]


class LocalClient:
    """`stream(messages)` / `cancel()` over a loaded `LocalLLM` (`engine`)."""

    def __init__(self, engine: LocalLLM) -> None:
        self.engine = engine
        self.name = engine.name
        """Shown by `voxcli chat` ("chat with ...")."""

    @property
    def tokenizer(self):
        return self.engine.tokenizer

    @property
    def config(self) -> LocalLLMConfig:
        return self.engine.config

    def cancel(self) -> None:
        """Stop every running `stream` at its next token (aborts a prefill in progress)."""
        self.engine.cancel()

    def stream(self, messages: list[dict], **overrides) -> Iterator[TextDelta]:
        """Reply to `messages` piece by piece; the last delta carries the metrics.

        `overrides` replace fields of the config for this call (e.g. temperature=0.7);
        bad settings raise UsageError at the call, not at the first `next()`.
        """
        gen = self.engine.start(messages, **overrides)
        return _Stream(self._deltas(gen), gen)

    def _deltas(self, gen: Generation) -> Iterator[TextDelta]:
        from voxcli.runtimes.smollm.tokenizer import IncrementalDecoder

        decoder = IncrementalDecoder(self.engine.tokenizer)
        index = 0
        for token in gen:
            text = decoder.push(token)
            if text:
                yield TextDelta(text=text, index=index)
                index += 1
        st = gen.stats
        metrics = make_metrics(
            t_start=st.t_start, t_first=st.t_first, t_end=time.perf_counter(), prompt_tokens=st.prompt_tokens,
            tokens=st.tokens, cancelled=st.cancelled,
        )
        metrics["cached_tokens"] = float(st.cached_tokens)
        if any(st.dropped):
            metrics["dropped_turns"], metrics["clipped_tokens"] = (float(n) for n in st.dropped)
        yield TextDelta(text="", index=index, is_final=True, metrics=metrics)

    def complete(self, messages: list[dict], **overrides) -> str:
        """The whole reply as one string (convenience for scripts and tests)."""
        return "".join(d.text for d in self.stream(messages, **overrides))


class _Stream:
    """`LocalClient.stream`'s deltas, and the `Generation` behind them: `cancel()` stops this reply alone
    (the client's `cancel()` stops every generation of the engine, a chat warm-up's too)."""

    def __init__(self, deltas: Iterator[TextDelta], generation: Generation) -> None:
        self._deltas, self.generation = deltas, generation

    def __iter__(self) -> "_Stream":
        return self

    def __next__(self) -> TextDelta:
        return next(self._deltas)

    def cancel(self) -> None:
        self.generation.cancel()


def load_local_llm(
    name: str | None = None,
    config: LocalLLMConfig | None = None,
    *,
    offline: bool | None = None,
    on_progress=None,
) -> LocalClient:
    """Resolve the model through the registry (pulling it if needed, with progress) and load it."""
    from voxcli.hub.resolve import resolve_model

    bundle = resolve_model(name or DEFAULT_MODEL, kind="llm", offline=offline, on_progress=on_progress)
    path = Path(bundle.path) / GGUF_FILE
    if not path.exists():  # another GGUF registered under another name
        found = sorted(Path(bundle.path).glob("*.gguf"))
        if not found:
            raise ModelNotFoundError(f"model {bundle.name!r} has no GGUF file in {bundle.path}")
        path = found[0]
    engine = LocalLLM.load(path, Path(bundle.derived_dir), config)
    engine.name = f"{bundle.name} (on-device, {engine.config.precision})"
    return LocalClient(engine)
