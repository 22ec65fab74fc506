"""The latency budget of one voice turn, and the chunk schedule check for incremental TTS.

Why a model and not just a stopwatch: a voice turn is a chain of stages owned
by different components (network, VAD, ASR, LLM, TTS), and two of them run at
the same time. After the user's last syllable reaches the server, the endpoint
detector holds for silence while the ASR finishes decoding the tail; the turn
can only proceed when *both* are done. So

    total = uplink + max(endpoint hold, ASR tail) + hops + LLM first token
            + TTS first audio + downlink

and shortening the shorter of the two parallel terms gains nothing. This
module is pure (no I/O, no clocks): the CLI fills the terms from presets,
flags, the config file or measurements, and renders what this computes.

The schedule check answers the other question of incremental TTS: once the
first chunk plays, is each next chunk ready before the previous one finishes?
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Final, Sequence

#: Typical gap between turns in human conversation, across ten languages
#: (Stivers et al. 2009, "Universals and cultural variation in turn-taking in
#: conversation", PNAS 106(26)): the mode is about 0-200 ms.
HUMAN_TURN_GAP_MS: Final = 200.0
#: The budget a voice agent turn should stay under (the design notes' limit):
#: beyond it the pause reads as "did it hear me?" and users start repeating.
LIMIT_MS: Final = 1400.0

#: Term names in turn order; `endpoint_ms` and `asr_tail_ms` run in parallel.
TERMS: Final = (
    "uplink_ms",
    "endpoint_ms",
    "asr_tail_ms",
    "hops_ms",
    "llm_ttft_ms",
    "tts_first_audio_ms",
    "downlink_ms",
)
PARALLEL: Final = ("endpoint_ms", "asr_tail_ms")

LABELS: Final = {
    "uplink_ms": "uplink",
    "endpoint_ms": "endpoint hold",
    "asr_tail_ms": "ASR tail",
    "hops_ms": "hops",
    "llm_ttft_ms": "LLM first token",
    "tts_first_audio_ms": "TTS first audio",
    "downlink_ms": "downlink",
}


@dataclass(frozen=True)
class TurnBudget:
    """The seven terms of one turn, in milliseconds, measured from the end of speech."""

    uplink_ms: float
    """User's last audio from the microphone to the server (capture block, codec, network, jitter buffer)."""
    endpoint_ms: float
    """Silence the endpoint detector waits for before it declares the turn over (VAD hold)."""
    asr_tail_ms: float
    """End of speech to the ASR's final transcript (decoding the last audio); parallel to the hold."""
    hops_ms: float
    """Service-to-service hand-offs between ASR, LLM and TTS."""
    llm_ttft_ms: float
    """Request to the LLM's first token (prompt processing and queueing included)."""
    tts_first_audio_ms: float
    """First text chunk to the TTS's first audio chunk (TTFA)."""
    downlink_ms: float
    """First audio from the server to the listener's ear (network, jitter buffer, playout)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not (v >= 0.0) or v == float("inf"):  # also rejects NaN
                raise ValueError(f"{f.name} must be a finite number >= 0, got {v!r}")

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def with_overrides(self, **overrides: float | None) -> "TurnBudget":
        """A copy with the given terms replaced (None means keep)."""
        return replace(self, **{k: float(v) for k, v in overrides.items() if v is not None})


# Where the preset numbers come from (also rendered by `voxcli ledger --help`).
PRESET_SOURCES: Final = {
    "default": (
        "The design notes' reference turn for a cloud voice agent: 95 ms each way "
        "(20 ms capture/Opus frame + ~40 ms network + ~35 ms jitter buffer), a 250 ms "
        "VAD silence hold, a 350 ms ASR tail (Moonshine tiny re-decoding a ~11 s "
        "utterance on 2 cores, cf. MODELS.md: 238 ms at 8 s, 372 ms at 12 s), 30 ms of "
        "in-datacenter hops, 375 ms to the first token of a hosted LLM, 100 ms TTS "
        "first audio. Total 1,045 ms."
    ),
    "webrtc": (
        "Same server side as default, with a WebRTC transport: uplink 50 ms "
        "(20 ms Opus frame + ~10 ms encode/packetize + ~20 ms regional network), "
        "downlink 70 ms (~20 ms network + ~40 ms adaptive jitter buffer + ~10 ms "
        "playout). Assumed typical figures, not measured here."
    ),
    "telephony": (
        "Same server side as default, reached over the phone network: 150 ms each way "
        "(ITU-T G.114 treats up to 150 ms one-way mouth-to-ear as acceptable; PSTN/"
        "mobile calls with a SIP gateway commonly sit there) and 60 ms of hops (the "
        "gateway/media server adds one bridge). Assumed, not measured here."
    ),
}

PRESETS: Final = {
    "default": TurnBudget(95, 250, 350, 30, 375, 100, 95),
    "webrtc": TurnBudget(50, 250, 350, 30, 375, 100, 70),
    "telephony": TurnBudget(150, 250, 350, 60, 375, 100, 150),
}


def preset(name: str) -> TurnBudget:
    """The preset of that name; ValueError listing the known ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r} (known: {', '.join(PRESETS)})") from None


@dataclass(frozen=True)
class Segment:
    """One term drawn on the shared time axis (ms since the end of speech)."""

    term: str
    start_ms: float
    end_ms: float
    critical: bool
    """On the critical path (the longer parallel branch counts; ties are both critical)."""
    slack_ms: float = 0.0
    """For the shorter parallel branch: how much it could grow before it mattered."""

    @property
    def label(self) -> str:
        return LABELS[self.term]

    @property
    def duration_ms(self) -> float:
        return self.end_ms - self.start_ms


@dataclass(frozen=True)
class Ledger:
    """A computed turn: total, the waterfall segments, per-term sensitivity."""

    budget: TurnBudget
    total_ms: float
    segments: tuple[Segment, ...]
    sensitivity_ms: dict[str, float]
    """Drop of the total when that term alone drops by `step_ms` (clamped at 0 ms)."""
    step_ms: float

    @property
    def critical_parallel(self) -> str | None:
        """'endpoint_ms' or 'asr_tail_ms', whichever is longer; None when they tie."""
        e, a = self.budget.endpoint_ms, self.budget.asr_tail_ms
        return None if e == a else ("endpoint_ms" if e > a else "asr_tail_ms")

    @property
    def dominant(self) -> str:
        """The largest term on the critical path."""
        crit = {s.term: s.duration_ms for s in self.segments if s.critical}
        return max(crit, key=lambda t: crit[t])

    def explain(self) -> list[str]:
        """The ledger in words: dominant term, which parallel branch matters, verdict."""
        b = self.budget
        dom = self.dominant
        lines = [
            f"{LABELS[dom][0].upper()}{LABELS[dom][1:]} is the largest term: {getattr(b, dom):.0f} ms of {self.total_ms:.0f} ms "
            f"({100.0 * getattr(b, dom) / self.total_ms if self.total_ms else 0:.0f}%)."
        ]
        crit = self.critical_parallel
        if crit is None:
            lines.append(
                f"Endpoint hold and ASR tail tie at {b.endpoint_ms:.0f} ms; shortening either one alone gains nothing."
            )
        else:
            other = "asr_tail_ms" if crit == "endpoint_ms" else "endpoint_ms"
            lines.append(
                f"{LABELS[crit][0].upper()}{LABELS[crit][1:]} is on the critical path; shortening the {LABELS[other]} gains nothing, "
                f"and it can grow by {abs(b.endpoint_ms - b.asr_tail_ms):.0f} ms for free "
                f"(it only matters once it exceeds {getattr(b, crit):.0f} ms)."
            )
        if self.total_ms <= HUMAN_TURN_GAP_MS:
            lines.append(f"Total {self.total_ms:.0f} ms: as fast as a human turn gap (~{HUMAN_TURN_GAP_MS:.0f} ms).")
        elif self.total_ms <= LIMIT_MS:
            lines.append(
                f"Total {self.total_ms:.0f} ms: within the {LIMIT_MS:,.0f} ms limit "
                f"({LIMIT_MS - self.total_ms:.0f} ms to spare), "
                f"{self.total_ms / HUMAN_TURN_GAP_MS:.1f}x a human turn gap."
            )
        else:
            lines.append(
                f"Total {self.total_ms:.0f} ms: {self.total_ms - LIMIT_MS:.0f} ms over the {LIMIT_MS:,.0f} ms limit."
            )
        return lines

    def to_dict(self) -> dict:
        return {
            "terms": self.budget.to_dict(),
            "total_ms": self.total_ms,
            "critical_parallel": self.critical_parallel,
            "dominant": self.dominant,
            "segments": [
                {
                    "term": s.term,
                    "start_ms": s.start_ms,
                    "end_ms": s.end_ms,
                    "critical": s.critical,
                    "slack_ms": s.slack_ms,
                }
                for s in self.segments
            ],
            "sensitivity_ms": self.sensitivity_ms,
            "sensitivity_step_ms": self.step_ms,
            "human_turn_gap_ms": HUMAN_TURN_GAP_MS,
            "limit_ms": LIMIT_MS,
            "within_limit": self.total_ms <= LIMIT_MS,
            "explanation": self.explain(),
        }


def total_ms(b: TurnBudget) -> float:
    """uplink + max(endpoint hold, ASR tail) + hops + LLM first token + TTS first audio + downlink."""
    return (
        b.uplink_ms
        + max(b.endpoint_ms, b.asr_tail_ms)
        + b.hops_ms
        + b.llm_ttft_ms
        + b.tts_first_audio_ms
        + b.downlink_ms
    )


def sensitivity(b: TurnBudget, step_ms: float = 100.0) -> dict[str, float]:
    """For each term: total(b) - total(b with that term reduced by step_ms, floored at 0)."""
    base = total_ms(b)
    out: dict[str, float] = {}
    for term in TERMS:
        reduced = replace(b, **{term: max(0.0, getattr(b, term) - step_ms)})
        out[term] = base - total_ms(reduced)
    return out


def compute(b: TurnBudget, step_ms: float = 100.0) -> Ledger:
    """Lay the terms on the time axis: serial terms end to end, the two parallel ones side by side."""
    segs: list[Segment] = []
    t = 0.0
    segs.append(Segment("uplink_ms", t, t + b.uplink_ms, True))
    t += b.uplink_ms
    longest = max(b.endpoint_ms, b.asr_tail_ms)
    for term in PARALLEL:
        v = getattr(b, term)
        segs.append(Segment(term, t, t + v, v == longest, slack_ms=longest - v))
    t += longest
    for term in ("hops_ms", "llm_ttft_ms", "tts_first_audio_ms", "downlink_ms"):
        v = getattr(b, term)
        segs.append(Segment(term, t, t + v, True))
        t += v
    return Ledger(b, t, tuple(segs), sensitivity(b, step_ms), step_ms)


# --------------------------------------------------------------------------------------
# Chunk schedule check for incremental TTS


@dataclass(frozen=True)
class ScheduledChunk:
    """One TTS chunk under the schedule model (all times in seconds from text available)."""

    index: int
    words: int
    audio_s: float
    """Spoken length: words / wpm * 60."""
    synth_s: float
    """Producer time for this chunk: RTF x audio + per-chunk overhead."""
    ready_s: float
    """When the chunk's audio exists (the producer is serial, so times accumulate)."""
    play_start_s: float
    play_end_s: float
    slack_s: float | None
    """Previous chunk's playback end minus this chunk's ready time (None for the first chunk)."""
    underrun_s: float
    """Length of the silent hole before this chunk (0 when it was ready in time)."""


@dataclass(frozen=True)
class Schedule:
    chunks: tuple[ScheduledChunk, ...]
    rtf: float
    overhead_s: float
    wpm: float

    @property
    def first_audio_s(self) -> float:
        return self.chunks[0].ready_s if self.chunks else 0.0

    @property
    def underruns(self) -> list[ScheduledChunk]:
        return [c for c in self.chunks if c.underrun_s > 0.0]

    @property
    def safe(self) -> bool:
        return not self.underruns

    @property
    def end_s(self) -> float:
        return self.chunks[-1].play_end_s if self.chunks else 0.0

    def to_dict(self) -> dict:
        return {
            "rtf": self.rtf,
            "overhead_s": self.overhead_s,
            "wpm": self.wpm,
            "safe": self.safe,
            "first_audio_s": self.first_audio_s,
            "end_s": self.end_s,
            "underrun_total_s": sum(c.underrun_s for c in self.chunks),
            "chunks": [asdict(c) for c in self.chunks],
        }


def schedule(words: Sequence[int], *, rtf: float, overhead_s: float, wpm: float = 150.0) -> Schedule:
    """Simulate a serial producer feeding a real-time player.

    Model (the one that gives the design notes' 1.74 s hole): all text is
    available at t=0; chunk k takes `rtf * audio_k + overhead` to synthesize
    and the producer starts chunk k+1 as soon as chunk k is done, so
    ready_k = sum_{i<=k}(rtf * audio_i + overhead). Playback starts when chunk
    1 is ready and never waits for anything but audio: chunk k starts at
    max(ready_k, end of chunk k-1); if ready_k is later, the listener hears a
    hole of ready_k - end_{k-1}.

    Example: 3/8/16 words at 150 wpm are 1.2/3.2/6.4 s of audio. With RTF 0.9
    and 60 ms overhead chunk 1 is ready at 1.14 s and plays until 2.34 s;
    chunk 2 is ready at 1.14 + 0.9*3.2 + 0.06 = 4.08 s: a 1.74 s hole. With
    RTF 0.3, chunk 2 is ready at 1.44 s while chunk 1 plays until 1.62 s: safe.
    """
    if wpm <= 0:
        raise ValueError("wpm must be > 0")
    if rtf < 0 or overhead_s < 0:
        raise ValueError("rtf and overhead must be >= 0")
    if any(w <= 0 for w in words):
        raise ValueError("every chunk needs at least one word")
    out: list[ScheduledChunk] = []
    ready = 0.0
    prev_end: float | None = None
    for i, w in enumerate(words):
        audio = w * 60.0 / wpm
        synth = rtf * audio + overhead_s
        ready += synth
        if prev_end is None:
            start, slack, hole = ready, None, 0.0
        else:
            slack = prev_end - ready
            start = max(ready, prev_end)
            hole = max(0.0, -slack)
        end = start + audio
        out.append(ScheduledChunk(i, int(w), audio, synth, ready, start, end, slack, hole))
        prev_end = end
    return Schedule(tuple(out), rtf, overhead_s, wpm)
