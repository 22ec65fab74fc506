"""Speculative finalization: the utterance's final decode runs during the endpoint hold.

The seed's ledger (002, chapter 6): after the last syllable the endpoint hold
and the recognizer's tail run in parallel, so the max counts, not the sum.
The streamer lives by it: at silence onset (VAD score below the low
threshold, the hold starts counting) it waits only for the end padding of
audio, decodes the utterance exactly as the final would, and keeps the
result here. If the hold completes with that onset, the result is committed
without decoding again; if a speech frame resets the hold, it is dropped and
the utterance goes on. Subscribers (the chat's preemptive reply) hear
`SpeculativeFinal` when the decode is ready and one `SpeculationEnd`
("confirmed" just before the final caption, or "dropped"); and every
utterance's start and end as the endpointer decides them (`UtteranceEdge`:
the chat agent times its turns from these, so its endpoint is this one).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from voxcli.events import Event, SpeculationEnd, SpeculativeFinal, UtteranceEdge

Subscriber = Callable[[Event], None]


@dataclass(frozen=True)
class Speculation:
    """One final decode made during the hold, and what it was made from."""

    utterance: int
    attempt: int
    onset: int
    """Silence onset (absolute sample): the `end` event's sample if the hold confirms it."""
    start: int
    end: int
    """The decoded span [start, end) of the stream (end = onset + end padding)."""
    frozen: tuple[str, ...]
    """Words of the utterance already cut out of the buffer (the final text starts with them)."""
    words: tuple[str, ...]
    text: str
    """The final transcript if confirmed."""
    speech_end: int
    """The utterance's last speech sample (absolute)."""

    def matches(self, start: int, end: int, frozen: list[str]) -> bool:
        """Was it decoded from this span, after these frozen words (commit it as is)?"""
        return (self.start, self.end, self.frozen) == (start, end, tuple(frozen))


class Speculator:
    """The pending speculation of the current utterance, and the subscribers told about it."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self.pending: Speculation | None = None
        self._subscribers: list[Subscriber] = []
        self._attempts = 0

    def subscribe(self, fn: Subscriber) -> None:
        self._subscribers.append(fn)

    def publish(self, ev: Event) -> None:
        for fn in list(self._subscribers):
            try:
                fn(ev)
            except Exception:  # noqa: BLE001 - a subscriber must never stop the recognizer
                pass

    def next_attempt(self) -> int:
        a = self._attempts
        self._attempts += 1
        return a

    def start(self, spec: Speculation, t_audio: float, t_emit: float) -> None:
        """Keep `spec`; announce it unless it heard no words (no final caption would follow)."""
        self.pending = spec
        if spec.text:
            self.publish(SpeculativeFinal(
                utterance=spec.utterance, attempt=spec.attempt, text=spec.text,
                speech_end=spec.speech_end / self.sample_rate, t_audio=t_audio, t_emit=t_emit))

    def end(self, outcome: str, t_emit: float) -> Speculation | None:
        """Close the pending speculation ("confirmed" or "dropped"); returns it (None if there was none)."""
        spec, self.pending = self.pending, None
        if spec is not None and spec.text:
            self.publish(SpeculationEnd(
                utterance=spec.utterance, attempt=spec.attempt, outcome=outcome,  # type: ignore[arg-type]
                text=spec.text, speech_end=spec.speech_end / self.sample_rate, t_emit=t_emit))
        return spec

    def edge(self, kind: str, utterance: int, sample: int, speech_end: int | None, t_emit: float) -> None:
        """Tell subscribers the endpointer started or ended utterance `utterance` (samples -> seconds)."""
        sr = self.sample_rate
        self.publish(UtteranceEdge(kind=kind, utterance=utterance, sample=sample / sr,  # type: ignore[arg-type]
                                   speech_end=None if speech_end is None else speech_end / sr, t_emit=t_emit))

    def next_utterance(self) -> None:
        self._attempts = 0
