"""The latency budget of one voice turn: seven terms, two of them in parallel.

Why a model and not just a stopwatch: a voice turn is a chain of stages owned
by different components (network, VAD, ASR, LLM, TTS), and two of them run at
the same time. After the user's last syllable reaches the server, the endpoint
detector holds for silence while the ASR finishes decoding the tail; the turn
can only proceed when *both* are done. So

    total = uplink + max(endpoint hold, ASR tail) + hops + LLM first token
            + TTS first audio + downlink

and shortening the shorter of the two parallel terms gains nothing. This
module is pure (no I/O, no clocks): `ledger_knobs` derives the terms from the
seed's knobs (chunk size, agreement n, first TTS chunk, endpoint hold,
network), `ledger_measure` measures them on this machine, the CLI renders.

An engine may not achieve the overlap: `asr_start_ms` says when the ASR tail
really starts after the end of speech (0 = with the hold, as the seed's
instrument assumes; the hold itself when the final decode waits for the
endpoint), `endpoint_start_ms` when its hold starts counting (a VAD's decay
after the last speech sample). The parallel branch then ends at
max(hold start + hold, ASR start + tail).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Final

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
    asr_start_ms: float = 0.0
    """When the ASR tail starts after the end of speech: 0 = in parallel with the hold (the seed's
    rule); up to the hold (+ VAD decay) for an engine that decodes only once the endpoint fired."""
    endpoint_start_ms: float = 0.0
    """When the hold starts counting after the last speech sample: 0 in the seed's instrument; a
    VAD's decay (it scores speech a while after it stops) in a real engine."""

    @property
    def hold_end_ms(self) -> float:
        return self.endpoint_start_ms + self.endpoint_ms

    @property
    def parallel_end_ms(self) -> float:
        """End of the parallel branch, from the end of speech: max(hold, ASR start + tail)."""
        return max(self.hold_end_ms, self.asr_start_ms + self.asr_tail_ms)

    @property
    def overlap_ms(self) -> float:
        """How much of the ASR tail ran while the hold was counting."""
        lo = max(self.asr_start_ms, self.endpoint_start_ms)
        return max(0.0, min(self.hold_end_ms, self.asr_start_ms + self.asr_tail_ms) - lo)

    @property
    def possible_overlap_ms(self) -> float:
        """The most that could: min(hold, tail)."""
        return min(self.endpoint_ms, self.asr_tail_ms)

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not (v >= 0.0) or v == float("inf"):  # also rejects NaN
                raise ValueError(f"{f.name} must be a finite number >= 0, got {v!r}")

    def to_dict(self) -> dict[str, float]:
        """The seven terms (and the two start offsets when an engine was measured not to start at 0)."""
        d = asdict(self)
        for k in ("asr_start_ms", "endpoint_start_ms"):
            if not d[k]:
                del d[k]
        return d

    def with_overrides(self, **overrides: float | None) -> "TurnBudget":
        """A copy with the given terms replaced (None means keep)."""
        return replace(self, **{k: float(v) for k, v in overrides.items() if v is not None})


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
        e, a = self.budget.hold_end_ms, self.budget.asr_start_ms + self.budget.asr_tail_ms
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
        if b.asr_start_ms > 0 or b.endpoint_start_ms > 0:
            lines.append(self._overlap_line())
        if b.asr_start_ms >= b.hold_end_ms > 0:
            pass  # serial: the overlap line said it all
        elif crit is None:
            lines.append(
                f"Endpoint hold and ASR tail tie at {b.hold_end_ms:.0f} ms; shortening either one alone gains nothing."
            )
        else:
            other = "asr_tail_ms" if crit == "endpoint_ms" else "endpoint_ms"
            lines.append(
                f"{LABELS[crit][0].upper()}{LABELS[crit][1:]} is on the critical path; shortening the {LABELS[other]} gains nothing, "
                f"and it can grow by {abs(b.hold_end_ms - b.asr_start_ms - b.asr_tail_ms):.0f} ms for free "
                f"(it only matters once it exceeds {getattr(b, other) + abs(b.hold_end_ms - b.asr_start_ms - b.asr_tail_ms):.0f} ms)."
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

    def _overlap_line(self) -> str:
        b = self.budget
        lost = b.parallel_end_ms - max(b.hold_end_ms, b.asr_tail_ms)
        head = (f"After the end of speech the hold starts at {b.endpoint_start_ms:.0f} ms and the ASR tail at "
                f"{b.asr_start_ms:.0f} ms: {b.overlap_ms:.0f} of a possible {b.possible_overlap_ms:.0f} ms of the "
                "tail overlaps the hold")
        if lost <= 0:
            return head + " (the engine runs them in parallel, as the seed says it should)."
        return head + f"; starting the final decode at silence onset would save {lost:.0f} ms."

    def to_dict(self) -> dict:
        b = self.budget
        return {
            "terms": b.to_dict(),
            "overlap": {"endpoint_start_ms": b.endpoint_start_ms, "asr_start_ms": b.asr_start_ms,
                        "overlap_ms": b.overlap_ms,
                        "possible_overlap_ms": b.possible_overlap_ms, "parallel_end_ms": b.parallel_end_ms},
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
    """uplink + max(hold, ASR start + tail) + hops + LLM first token + TTS first audio + downlink."""
    return (
        b.uplink_ms
        + b.parallel_end_ms
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
    longest = b.parallel_end_ms
    serial = b.asr_start_ms >= b.hold_end_ms > 0  # the tail waited for the hold: both are on the path
    for term, start in (("endpoint_ms", b.endpoint_start_ms), ("asr_tail_ms", b.asr_start_ms)):
        end = start + getattr(b, term)
        crit = end == longest or (serial and term == "endpoint_ms")
        segs.append(Segment(term, t + start, t + end, crit, slack_ms=0.0 if crit else longest - end))
    t += longest
    for term in ("hops_ms", "llm_ttft_ms", "tts_first_audio_ms", "downlink_ms"):
        v = getattr(b, term)
        segs.append(Segment(term, t, t + v, True))
        t += v
    return Ledger(b, t, tuple(segs), sensitivity(b, step_ms), step_ms)
