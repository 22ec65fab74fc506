"""The event vocabulary shared by the library, the CLI views and `--json` lines.

Every stream voxcli produces is a sequence of these dataclasses; `to_json()`
gives the same field names the rich views show, so a shell script and a CI job
read exactly what a person sees.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, ClassVar, Literal, TypeVar, dataclass_transform

import numpy as np

ChunkKind = Literal["audio", "final", "cancelled"]
ProgressPhase = Literal["resolve", "download", "verify", "extract", "ready"]


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return None  # audio never goes into JSON lines; `samples` says how much
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Event):
        return value.to_dict()  # AudioChunk.words
    return value


class Event:
    """Base of every event: `to_dict()`/`to_json()` with the event's name under "event".

    The name is given in the class line (`class Caption(Event, event="caption")`),
    next to the class it names, and is a class attribute, not a dataclass field.
    """

    event: ClassVar[str] = "event"

    def __init_subclass__(cls, event: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if event:
            cls.event = event

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": self.event}
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if isinstance(v, np.ndarray):
                out["samples"] = int(v.size)
                continue
            if hasattr(v, "to_dict"):
                v = v.to_dict()
            elif hasattr(v, "__dataclass_fields__"):
                v = asdict(v)
            out[f.name] = _jsonable(v)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)


_E = TypeVar("_E", bound=type)


@dataclass_transform(frozen_default=True)
def event(name: str, *, eq: bool = True) -> Callable[[_E], _E]:
    """Declare an event class: a frozen dataclass whose JSON lines say `"event": name`.

    One decorator instead of `@dataclass(frozen=True)` plus an `event = ...`
    attribute on every class: the name stands next to the class it names.
    """

    def make(cls: _E) -> _E:
        cls.event = name  # type: ignore[attr-defined]
        return dataclass(frozen=True, eq=eq)(cls)  # type: ignore[return-value]

    return make


@event("stats")
class StreamStats(Event):
    """Metrics of one finished (or cancelled) audio stream."""

    ttfa_s: float | None
    """Stream start (or first `send`) to the first audio chunk; None if no audio."""
    rtf: float
    """Synthesis time / audio time; below 1 means faster than real time."""
    audio_s: float
    """Seconds of audio produced."""
    total_s: float
    """Stream start to the final chunk."""
    chunks: int
    """Audio chunks emitted (the sentinel not counted)."""
    underruns: int
    """Times a real-time player would have run dry waiting for the next chunk."""
    underrun_s: float = 0.0
    """Total length of those holes."""


@event("chunk", eq=False)
class AudioChunk(Event):
    """A piece of synthesized audio, or the stream's final/cancelled sentinel."""

    audio: np.ndarray
    """float32 mono in [-1, 1]; empty for the sentinel."""
    sample_rate: int
    index: int
    is_final: bool = False
    kind: ChunkKind = "audio"
    text: str = ""
    """The text this audio speaks (the chunk's share of it)."""
    t_emit: float = 0.0
    """Seconds since stream start when the chunk was emitted."""
    synth_s: float = 0.0
    """Seconds of compute that produced this chunk."""
    stats: StreamStats | None = None
    """Only on the final/cancelled sentinel."""
    words: tuple[Word, ...] = ()
    """TTS: the words that start in this chunk, with stream times and spans of the text sent
    (voxcli.tts.words); () for the sentinels."""

    @property
    def duration_s(self) -> float:
        return self.audio.size / float(self.sample_rate) if self.sample_rate else 0.0


@event("caption")
class Caption(Event):
    """A live transcript update: `stable` only ever grows within an utterance."""

    stable: str
    """Words decided for good (LocalAgreement): later captions of the utterance start with them."""
    volatile: str
    """The current guess for the rest; may still change."""
    is_final: bool
    """The utterance ended (endpoint or end of input); `stable` is its transcript."""
    t_audio: float
    """Seconds of audio received when this caption was decided."""
    t_emit: float
    """Seconds since stream start when the caption was emitted."""
    utterance: int = 0
    """0-based number of the utterance within the stream."""


@event("delta")
class TextDelta(Event):
    """A piece of text from an LLM or from stdin."""

    text: str
    index: int
    """Position of this delta in its stream, from 0."""
    is_final: bool = False
    metrics: dict[str, float] = field(default_factory=dict)
    """On the final delta of an LLM stream: ttft_s, prompt_tokens, tokens, tokens_per_s, total_s."""


@event("progress")
class Progress(Event):
    """Progress of a long operation (pull): `done`/`total` in bytes or files."""

    phase: ProgressPhase
    done: int = 0
    total: int | None = None
    """None while the size is unknown (no Content-Length yet)."""
    model: str = ""
    detail: str = ""
    """One human-readable line (URL, file name), for the views."""


@event("word")
class Word(Event):
    """A word with its time span: recognized (ASR, in the decoded buffer) or spoken (TTS, in the stream)."""

    text: str
    start: float
    """Seconds from the start of the decoded buffer / the TTS stream (estimated where the model gives no times)."""
    end: float
    prob: float = 1.0
    """Model confidence where the model has one; 1.0 where it has none."""
    char_start: int | None = None
    """TTS: start of the characters of the text sent that this word was read from ("$3.50" for
    "dollars"); None for ASR words (no written text)."""
    char_end: int | None = None
    """TTS: end (exclusive) of that span."""

    @property
    def start_s(self) -> float:
        return self.start

    @property
    def end_s(self) -> float:
        return self.end


@event("speculative_final")
class SpeculativeFinal(Event):
    """ASR: at silence onset the utterance's final decode ran during the endpoint hold.

    If the hold confirms the endpoint, the final caption's `stable` is `text`, word for word.
    """

    utterance: int
    """Same number as the `Caption.utterance` of the final it announces."""
    attempt: int
    """0-based within the utterance: a dropped attempt may be followed by another."""
    text: str
    speech_end: float
    """Stream seconds of the utterance's last speech sample (not the VAD's later silence frame)."""
    t_audio: float
    """Seconds of audio heard when the decode finished."""
    t_emit: float
    """Seconds since the stream's first audio."""


@event("speculation_end")
class SpeculationEnd(Event):
    """ASR: the endpoint hold confirmed a `SpeculativeFinal` (before its final caption), or speech resumed."""

    utterance: int
    attempt: int
    outcome: Literal["confirmed", "dropped"]
    text: str
    speech_end: float
    t_emit: float


@event("utterance_edge")
class UtteranceEdge(Event):
    """ASR: the streamer's endpointer started or ended an utterance (before that utterance's final caption).

    The endpoint a chat user experiences is this one (`hold_from` included), so the agent stamps its
    turns from these instead of running a second endpointer.
    """

    kind: Literal["start", "end"]
    utterance: int
    """The `Caption.utterance` its captions will carry (an utterance with no words gives its number to the next)."""
    sample: float
    """Stream seconds: the first speech frame ("start"), or where the trailing silence began ("end")."""
    speech_end: float | None = None
    """"end": stream seconds of the last speech sample (the turn's origin)."""
    t_emit: float = 0.0


# ---------------------------------------------------------------- chat turns

@event("turn_start")
class TurnStart(Event):
    """`voxcli chat`: a user turn was taken (its final transcript)."""

    turn: int
    """1-based number of the exchange in this chat session."""
    user: str


@event("spoken")
class Spoken(Event):
    """A piece of the assistant's reply, handed to the speaker."""

    turn: int
    text: str
    """Exactly the text of the audio just queued to the speaker."""


@event("barge_in")
class BargeIn(Event):
    """`voxcli chat`: the user interrupted the reply."""

    turn: int
    heard: str
    """The reply as heard up to the interruption (the new history entry)."""
    user_words: str


@event("notice")
class Notice(Event):
    """`voxcli chat`: something the user should be told (error, cut-off answer)."""

    kind: str
    """What happened, for scripts: "error", "cut_off", "ignored"."""
    message: str
