"""The turn as voxcli's own chat engine runs it: preemptive reply and semantic end of turn.

The seed's ledger (`voxcli.bench.ledger`) has one rule of overlap: the endpoint
hold and the ASR tail run in parallel, and everything after them is a serial
sum. voxcli's chat overlaps more than that, so `ledger --measured` predicted
its turns wrong (655 ms predicted for a semantic turn measured at 440 ms):

- Preemptive reply (`voxcli.chat.preempt`, VAD endpoint): the LLM request --
  and the TTS of its first clause -- start on the speculative final, *during*
  the hold; playback waits for the endpoint. The first audio is then
  max(hold end, ASR ready + hops + LLM first token + TTS first audio): the
  reply chain is a third branch in parallel with the hold, not a sum after it.
- Semantic end of turn (`voxcli.chat.turn_gate`): the streamer holds only the
  short hold; the detector scores the final (the reply starts on it at once
  while it scores); a complete thought is released when the score is known,
  a mid-phrase one waits until its longer hold has passed since the end of
  speech and only then asks the LLM. The hold is no longer one number but a
  distribution -- the detector's hold for each turn -- so the prediction is
  the median over those turns.

Pure: the measured inputs (holds per turn, detector latency) come from
`voxcli.bench.ledger_measure`.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Final

from voxcli.bench.ledger import TurnBudget, total_ms
from voxcli.bench.metrics import percentile
from voxcli.chat.turn_gate import ENDPOINT_MODES

SAMPLE_TURNS: Final = (
    "What is the capital of France?", "How many legs does a spider have?", "What colour is the sky on a clear day?",
    "Name a fruit that is yellow.", "What is two plus two?", "Which planet is closest to the sun?",
    "What do bees make?", "How many days are in a week?", "What is the opposite of hot?",
    "Where do penguins live?", "What is frozen water called?", "Which animal says moo?",
)
"""Complete user turns (the questions benchmarks/bench_turn.py speaks) for the detector's hold distribution
when chat's turn log has none."""


@dataclass(frozen=True)
class EngineModel:
    """How the chat engine schedules a turn (the inputs the seed's ledger has no term for)."""

    endpoint: str = "vad"
    """"vad" (the hold alone ends the turn) or "semantic" (the turn detector sets the hold per turn)."""
    preemptive: bool = True
    """The reply starts on the ASR's final before the turn is confirmed (speculative final / detector running)."""
    holds_ms: tuple[float, ...] = ()
    """Semantic: the detector's hold (from the last speech sample) for each sample turn; its distribution."""
    detector_ms: float = 0.0
    """Semantic: time to score one final (on the critical path when the hold is short)."""

    def __post_init__(self) -> None:
        if self.endpoint not in ENDPOINT_MODES:
            raise ValueError(f"endpoint must be one of {', '.join(ENDPOINT_MODES)}, not {self.endpoint!r}")
        if self.endpoint == "semantic" and not self.holds_ms:
            raise ValueError("the semantic endpoint needs the detector's holds (holds_ms)")
        if self.detector_ms < 0 or any(not h >= 0 for h in self.holds_ms):
            raise ValueError("holds and detector time must be >= 0 ms")


@dataclass(frozen=True)
class TurnPath:
    """One predicted turn, ms after the end of speech (network legs included)."""

    release_ms: float
    """When the turn is confirmed (endpoint, or the detector's verdict / its longer hold)."""
    reply_start_ms: float
    """When the LLM request goes out (before the release: preemptive)."""
    first_audio_ms: float
    hold_ms: float | None = None
    """Semantic: the detector's hold for this turn."""
    released_by: str = "endpoint"
    """endpoint (VAD hold) | verdict (semantic: complete, goes when scored) | hold (semantic: its longer hold)."""


@dataclass(frozen=True)
class EnginePrediction:
    model: EngineModel
    turns: tuple[TurnPath, ...]
    seed_total_ms: float
    """The seed's formula on the same terms (hold and ASR tail in parallel, the rest a serial sum)."""

    @property
    def total_ms(self) -> float:
        """Median predicted first audio (the figure chat's turn log reports as `total_ms` p50)."""
        return float(statistics.median(t.first_audio_ms for t in self.turns))

    @property
    def p95_ms(self) -> float:
        return _q(tuple(t.first_audio_ms for t in self.turns), 95)

    def explain(self) -> list[str]:
        m, t = self.model, self.turns
        saved = self.seed_total_ms - self.total_ms
        if m.endpoint == "vad":
            p = t[0]
            how = (f"the reply starts on the speculative final at {p.reply_start_ms:.0f} ms, during the hold "
                   f"(confirmed at {p.release_ms:.0f} ms)" if p.reply_start_ms < p.release_ms
                   else "the reply starts after the endpoint")
            return [f"Engine (vad{', preemptive' if m.preemptive else ''}): {how}; first audio "
                    f"{p.first_audio_ms:.0f} ms, {saved:.0f} ms under the seed's serial chain."]
        fast = sum(1 for p in t if p.released_by == "verdict")
        return [f"Engine (semantic{', preemptive' if m.preemptive else ''}): the detector's hold over "
                f"{len(t)} turns is {_q(m.holds_ms, 50):.0f} ms p50 / {_q(m.holds_ms, 95):.0f} ms p95 "
                f"(scored in {m.detector_ms:.0f} ms); {fast} of {len(t)} turns go when scored; first audio "
                f"{self.total_ms:.0f} ms p50 / {self.p95_ms:.0f} ms p95."]

    def to_dict(self) -> dict[str, Any]:
        m = self.model
        return {"endpoint": m.endpoint, "preemptive": m.preemptive, "total_ms": round(self.total_ms, 2),
                "p95_ms": round(self.p95_ms, 2), "seed_total_ms": round(self.seed_total_ms, 2),
                "detector_ms": round(m.detector_ms, 2), "holds_ms": [round(h, 1) for h in m.holds_ms],
                "turns": [{k: (round(v, 2) if isinstance(v, float) else v) for k, v in vars(p).items()}
                          for p in self.turns],
                "explanation": self.explain()}


def _q(xs: tuple[float, ...], pct: float) -> float:
    """The percentile every voxcli report uses (`bench.metrics.percentile`); 0 for no values."""
    return percentile(xs, pct) if xs else 0.0


def _vad_turn(b: TurnBudget, preemptive: bool) -> TurnPath:
    """Hold end and ASR ready in parallel; preemptive: the reply chain too (audio waits for the hold)."""
    chain = b.hops_ms + b.llm_ttft_ms + b.tts_first_audio_ms
    ready = b.asr_start_ms + b.asr_tail_ms
    release = b.parallel_end_ms
    if preemptive and ready < b.hold_end_ms:  # the speculative final exists during the hold
        return TurnPath(release, ready, max(release, ready + chain))
    return TurnPath(release, release, release + chain)


def _semantic_turn(b: TurnBudget, hold: float, detector_ms: float, preemptive: bool) -> TurnPath:
    """The streamer's short hold gives the final; the detector's verdict or its longer hold releases the turn."""
    chain = b.hops_ms + b.llm_ttft_ms + b.tts_first_audio_ms
    final = b.parallel_end_ms  # the short hold and the ASR tail (measured with that hold)
    verdict = final + detector_ms
    if hold <= verdict:  # complete: released as soon as it is scored
        start = final if preemptive else verdict
        return TurnPath(verdict, start, max(verdict, start + chain), hold, "verdict")
    return TurnPath(hold, hold, hold + chain, hold, "hold")  # held: the early reply is dropped; asked again


def predict(b: TurnBudget, m: EngineModel) -> EnginePrediction:
    """First reply audio per turn as the chat engine schedules it (uplink and downlink added)."""
    legs = b.uplink_ms + b.downlink_ms
    if m.endpoint == "vad":
        paths = [_vad_turn(b, m.preemptive)]
    else:
        paths = [_semantic_turn(b, h, m.detector_ms, m.preemptive) for h in m.holds_ms]
    shifted = tuple(TurnPath(p.release_ms + b.uplink_ms, p.reply_start_ms + b.uplink_ms,
                             p.first_audio_ms + legs, p.hold_ms, p.released_by) for p in paths)
    return EnginePrediction(m, shifted, total_ms(b))
