"""The per-turn latency record of `voxcli chat` and its JSON-lines log.

One line per finished turn is appended to `voxcli.config.turn_log_path()`
(`turns.jsonl` in the data dir); `voxcli ledger --measured` reads the latest
ones. This module builds, writes and reads the records; the format below is
the contract with the ledger.

Why stamps and terms both: the stamps (ms after the end of the user's speech)
show the turn as it happened; `terms` maps them onto the ledger's named
terms (`voxcli.bench.ledger.TERMS`) so the ledger can use them directly.

Turn log format (contract with `voxcli ledger --measured`; version 1)
---------------------------------------------------------------------
One JSON object per line in `voxcli.config.turn_log_path()` (the data dir's
`turns.jsonl`, platformdirs `user_data_dir("voxcli")` or `$VOXCLI_DATA_DIR`):

    {"event": "turn", "version": 1, "turn": 0, "t_unix": 1764450000.1,
     "user": "what is the capital of france", "assistant": "Paris is ...",
     "interrupted": false, "cut_off": false, "llm": "model @ http://...",
     "speech_end_ms": 0.0, "endpoint_ms": 512.0, "asr_final_ms": 640.3,
     "llm_request_ms": 641.0, "llm_first_token_ms": 790.2, "first_audio_ms": 905.7,
     "terms": {"endpoint_ms": 512.0, "asr_tail_ms": 640.3, "hops_ms": 0.7,
               "llm_ttft_ms": 149.2, "tts_first_audio_ms": 115.5, "total_ms": 905.7},
     "llm_metrics": {"ttft_s": 0.149, "prompt_tokens": 31, "tokens": 12, ...}}

- `*_ms` stamps are milliseconds after the end of the user's speech (the VAD
  frame where the trailing silence began, mapped to wall time); null when the
  turn never reached that point (e.g. no audio after a barge-in).
- `terms` uses the names of `voxcli.bench.ledger.TERMS`: endpoint_ms = speech
  end -> endpoint decision (the hold as measured); asr_tail_ms = speech end ->
  ASR final transcript (our ASR finalizes after the hold, so it includes it;
  max(endpoint, asr_tail) is the critical path either way); hops_ms = ASR final
  -> LLM request sent; llm_ttft_ms = request -> first token; tts_first_audio_ms
  = first token -> first audio handed to the speaker; total_ms = speech end ->
  first audio. Terms that were not measured are absent (uplink and downlink
  never are). Readers skip lines that do not parse or have another "event".
- Optional keys (older lines lack them): `preemptive`, `wasted_preemptive`,
  `detector` (`--endpoint semantic`: {"score", "hold_ms", "score_ms", "held"},
  the turn detector's verdict on the user's words; `{}` in vad mode), and
  `audio_ready_ms` (the first audio existed; earlier than `first_audio_ms` when a
  preemptive reply waited for the endpoint's verdict before playing it), and
  `asr` (the recognizer that heard the user, e.g. "moonshine-tiny-en", and the
  one that decoded the finals after a "+": the turn's ASR tail depends on them;
  "" when unknown).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voxcli.events import Event

FORMAT_VERSION = 1


@dataclass
class TurnClock:
    """perf_counter stamps of one turn; None where the turn never got there."""

    speech_end: float | None = None
    endpoint: float | None = None
    asr_final: float | None = None
    llm_request: float | None = None
    llm_first_token: float | None = None
    audio_ready: float | None = None
    """A preemptive reply's first audio existed (before it waited for the endpoint's verdict)."""
    first_audio: float | None = None
    end: float | None = None


@dataclass(frozen=True)
class TurnRecord(Event):
    """One finished turn: what was said, what was heard, and when."""

    turn: int
    user: str
    assistant: str
    """The reply as heard: truncated to what played when the user barged in."""
    interrupted: bool
    cut_off: bool
    llm: str
    speech_end_ms: float | None
    """Always 0.0 when known: the origin of the other stamps."""
    endpoint_ms: float | None
    asr_final_ms: float | None
    llm_request_ms: float | None
    llm_first_token_ms: float | None
    first_audio_ms: float | None
    terms: dict[str, float] = field(default_factory=dict)
    llm_metrics: dict[str, float] = field(default_factory=dict)
    preemptive: bool = False
    """The reply started on the ASR's speculative final, during the hold (its LLM request may precede
    the endpoint; `hops_ms` is then 0 and the terms overlap instead of adding up)."""
    wasted_preemptive: int = 0
    """Preemptive replies cancelled since the previous turn because the user went on."""
    detector: dict[str, float] = field(default_factory=dict)
    """`--endpoint semantic`: the turn detector's verdict (score, hold_ms, score_ms the final waited for it,
    held 1/0); empty in vad mode. Optional: readers of version 1 ignore it."""
    audio_ready_ms: float | None = None
    """When the first audio existed: before `first_audio_ms` when a preemptive reply waited for the endpoint's
    verdict (what `voxcli.bench.ledger_turns` needs: the TTS term without that wait). Optional."""
    asr: str = ""
    """The recognizer's model name (optional; older lines lack it)."""
    t_unix: float = 0.0
    version: int = FORMAT_VERSION
    event = "turn"


def name_of(obj: Any) -> str:
    """What a turn record calls an LLM client or an ASR engine: its `name`, else its type ("" for none)."""
    return "" if obj is None else str(getattr(obj, "name", type(obj).__name__))


def asr_name(streamer: Any) -> str:
    """The recognizer(s) of a streamer: "moonshine-tiny-en", or "moonshine-tiny-en+moonshine-base-en" when a
    second model decodes the finals (`ASRStreamer.final_model`)."""
    final = getattr(streamer, "final_model", None)
    return name_of(getattr(streamer, "model", None)) + (f"+{name_of(final)}" if final is not None else "")


def _ms(t: float | None, origin: float | None) -> float | None:
    if t is None or origin is None:
        return None
    return round((t - origin) * 1000.0, 1)


def _diff(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return round(max(b - a, 0.0) * 1000.0, 1)


def _ready(clock: TurnClock) -> float | None:
    """The first audio's readiness: its own stamp when it is this reply's (not before the request), else the
    first audio (a reply that did not wait for a verdict played it at once)."""
    ready = clock.audio_ready
    if ready is None or (clock.llm_request is not None and ready < clock.llm_request):
        return clock.first_audio
    return min(ready, clock.first_audio) if clock.first_audio is not None else ready


def make_record(
    turn: int,
    clock: TurnClock,
    *,
    user: str,
    assistant: str,
    interrupted: bool,
    cut_off: bool,
    llm: str,
    llm_metrics: dict[str, float] | None = None,
    preemptive: bool = False,
    wasted_preemptive: int = 0,
    detector: dict[str, float] | None = None,
    asr: str = "",
) -> TurnRecord:
    """Stamps relative to the end of speech (or the ASR final when speech end is unknown)."""
    origin = clock.speech_end if clock.speech_end is not None else clock.asr_final
    terms = {
        "endpoint_ms": _diff(clock.speech_end, clock.endpoint),
        "asr_tail_ms": _diff(clock.speech_end, clock.asr_final),
        "hops_ms": _diff(clock.asr_final, clock.llm_request),
        "llm_ttft_ms": _diff(clock.llm_request, clock.llm_first_token),
        "tts_first_audio_ms": _diff(clock.llm_first_token, clock.first_audio),
        "total_ms": _diff(origin, clock.first_audio),
    }
    return TurnRecord(
        turn=turn,
        user=user,
        assistant=assistant,
        interrupted=interrupted,
        cut_off=cut_off,
        llm=llm,
        speech_end_ms=_ms(clock.speech_end, origin),
        endpoint_ms=_ms(clock.endpoint, origin),
        asr_final_ms=_ms(clock.asr_final, origin),
        llm_request_ms=_ms(clock.llm_request, origin),
        llm_first_token_ms=_ms(clock.llm_first_token, origin),
        first_audio_ms=_ms(clock.first_audio, origin),
        terms={k: v for k, v in terms.items() if v is not None},
        llm_metrics={k: round(float(v), 4) for k, v in (llm_metrics or {}).items()},
        preemptive=preemptive,
        wasted_preemptive=wasted_preemptive,
        detector=dict(detector or {}),
        audio_ready_ms=_ms(_ready(clock), origin),
        asr=asr,
        t_unix=time.time(),
    )


def append_turn(record: TurnRecord, path: Path | None = None) -> Path:
    """Append one JSON line (O_APPEND: concurrent chats never interleave within a line)."""
    if path is None:
        from voxcli.config import data_dir, turn_log_path

        data_dir(create=True)
        path = turn_log_path()
    from voxcli.fsutil import append_line

    return append_line(path, record.to_json(), 0o600)  # turns hold what the user said: private


def read_turns(path: Path | None = None, last: int | None = None) -> list[dict[str, Any]]:
    """Records of the turn log, oldest first; torn or foreign lines are skipped."""
    if path is None:
        from voxcli.config import turn_log_path

        path = turn_log_path()
    from voxcli.fsutil import read_records

    return read_records(path, lambda obj: obj.get("event") == "turn", last)
