"""Latency versus flicker: the frontier the seed's second instrument draws (`voxcli ledger frontier`).

"Every millisecond of commitment delay you refuse to spend comes back as
instability." Sweeping the chunk size (= update interval) for each agreement
n gives one curve per n; each point is a configuration with

- flicker: words retracted from the *stable* text per 100 words of the final
  transcript, when LocalAgreement-n as the seed writes it (emit the longest
  prefix the last n hypotheses agree on, promote only when it is longer) is fed
  the real recognizer's hypotheses on real speech;
- commit delay: mean time from a word's first appearance (at its place, in its
  final form) to its first promotion to stable in that form, same run;
- turn latency: the ledger's total for that chunk and n, the other knobs as
  given (`voxcli.bench.ledger_knobs`).

One pass of the recognizer serves every point: the audio prefix is decoded
once per `grid_ms` (no prompt, as a plain re-decoding streamer does), and a
chunk of k x grid uses every k-th hypothesis.
"""
from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

from voxcli.bench.ledger_knobs import Knobs, turn_ms

Hypotheses = Sequence[tuple[float, list[str]]]
"""(time in ms, words) of each re-decode, in order."""


def norm(word: str) -> str:
    """Case and punctuation do not count as a change of word."""
    return re.sub(r"[^\w']", "", word.lower())


def _lcp(a: Sequence[str], b: Sequence[str]) -> int:
    i = 0
    while i < len(a) and i < len(b) and a[i] == b[i]:
        i += 1
    return i


@dataclass(frozen=True)
class Replay:
    """LocalAgreement-n replayed over a hypothesis sequence."""

    retracted: int
    """Stable words later replaced or removed."""
    final_words: int
    commit_delay_ms: float
    """Mean first-seen -> first-stable time of the final stable words (0 when none)."""

    @property
    def flicker(self) -> float:
        """Retracted words per 100 final words."""
        return 100.0 * self.retracted / self.final_words if self.final_words else 0.0


def _first_times(texts: Sequence[tuple[float, list[str]]], final: list[str]) -> dict[int, float]:
    """For each index of `final`: the time of the first text whose prefix up to it matches `final`."""
    first: dict[int, float] = {}
    for t, w in texts:
        for i in range(len(first), _lcp(w, final)):
            first[i] = t
    return first


def replay(hyps: Hypotheses, n: int) -> Replay:
    """The seed's LocalAgreement-n (Chapter 4) over `hyps`; counts what a consumer of stable text saw retracted."""
    hist: list[list[str]] = []
    emitted: list[str] = []
    promoted: list[tuple[float, list[str]]] = []  # the stable text after each promotion
    seen: list[tuple[float, list[str]]] = []
    retracted = 0
    for t, words in hyps:
        w = [norm(x) for x in words if norm(x)]
        seen.append((t, w))
        hist = (hist + [w])[-n:]
        if len(hist) < n:
            continue
        agree = hist[0]
        for h in hist[1:]:
            agree = agree[: _lcp(agree, h)]
        if len(agree) > len(emitted):
            keep = _lcp(emitted, agree)
            retracted += len(emitted) - keep
            emitted = list(agree)
            promoted.append((t, emitted))
    # A final word was first seen (first stable) in the first hypothesis (stable text) that already held it
    # after its final left context; its commit delay is the time between the two.
    first_seen, first_stable = _first_times(seen, emitted), _first_times(promoted, emitted)
    delays = [first_stable[i] - first_seen.get(i, first_stable[i]) for i in range(len(emitted))]
    return Replay(retracted, len(emitted), sum(delays) / len(delays) if delays else 0.0)


@dataclass(frozen=True)
class FrontierPoint:
    chunk_ms: float
    agreement: int
    flicker: float
    """Retracted stable words per 100 final words."""
    retracted: int
    commit_delay_ms: float
    turn_ms: float
    """The ledger's total for this chunk and n."""
    pareto: bool = False
    """No other point is at least as good on both axes and better on one."""

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 2) if isinstance(v, float) else v for k, v in asdict(self).items()}


def _mark_pareto(points: list[FrontierPoint]) -> list[FrontierPoint]:
    def dominated(p: FrontierPoint) -> bool:
        return any(q.turn_ms <= p.turn_ms and q.flicker <= p.flicker and (q.turn_ms, q.flicker) != (p.turn_ms, p.flicker)
                   for q in points)

    return [FrontierPoint(**{**asdict(p), "pareto": not dominated(p)}) for p in points]


def frontier(hyps: Hypotheses, grid_ms: float, chunks_ms: Sequence[float], agreements: Sequence[int],
             base: Knobs) -> list[FrontierPoint]:
    """One point per (n, chunk): a chunk of k x grid replays every k-th hypothesis."""
    points = []
    for n in agreements:
        for c in chunks_ms:
            k = round(c / grid_ms)
            if k < 1 or abs(k * grid_ms - c) > 1e-6:
                raise ValueError(f"chunk {c:g} ms is not a multiple of the {grid_ms:g} ms grid")
            r = replay([h for i, h in enumerate(hyps) if (i + 1) % k == 0], n)
            points.append(FrontierPoint(float(c), int(n), r.flicker, r.retracted, r.commit_delay_ms,
                                        turn_ms(base.with_(chunk_ms=float(c), agreement=int(n)))))
    return _mark_pareto(points)


def decode_grid(transcribe: Callable[[Any], list[str]], audio: Any, grid_ms: float,
                sample_rate: int = 16000) -> list[tuple[float, list[str]]]:
    """Re-decode the growing prefix every `grid_ms` (and once at the end): the hypotheses a streamer sees."""
    step = int(grid_ms * sample_rate / 1000)
    if step <= 0:
        raise ValueError("grid must be > 0 ms")
    ends = list(range(step, len(audio) + 1, step))
    return [(e * 1000.0 / sample_rate, transcribe(audio[:e])) for e in ends]


def measure_hypotheses(grid_ms: float, max_s: float | None = None, offline: bool | None = None,
                       model: str | None = None) -> tuple[list[tuple[float, list[str]]], dict[str, Any]]:
    """The recognizer's hypotheses over beckett.wav (real speech), and what was run."""
    from voxcli.asr.models import chat_asr, load_asr
    from voxcli.bench.ledger_overlap import _speech

    asr, _vad = load_asr(chat_asr(model), offline=offline)  # the frontier is chat's: its recognizer
    audio = _speech(offline)
    if max_s is not None:
        audio = audio[: int(max_s * 16000)]
    t = time.perf_counter()
    hyps = decode_grid(lambda a: [w.text for w in asr.transcribe(a)], audio, grid_ms)
    info = {"model": getattr(asr, "name", ""), "audio": "beckett.wav", "audio_s": round(len(audio) / 16000, 2),
            "grid_ms": grid_ms,
            "decodes": len(hyps), "decode_s": round(time.perf_counter() - t, 2)}
    return hyps, info
