"""chat's turn predicted from the terms its own turn log measured, on the schedule the engine runs.

Why from the turn log: the seed's terms measured apart (the ASR streamer alone
on beckett.wav, the TTFA of one whole sentence) are not the terms of a chat
turn. In chat the ASR, the LLM, the turn detector and the voice share 2 cores,
and the first TTS chunk waits for the LLM to write its words. Measured
2026-12-01 (quiet, load 0.4-0.7, `benchmarks/bench_turn.py --turns 10
--rounds 5 --endpoint vad --endpoint semantic`): vad 552 ms p50 where the
ledger said 638 (+16 %: a preemptive reply's first token -> first audio
includes its wait for the endpoint, which the ledger then added after the
ASR a second time), semantic 451 ms where it said 343 (-24 %: the streamer
alone finalizes ~40 ms sooner than in chat, and the TTS term of one sentence
misses the first chunk's wait for the LLM's words).

Terms: medians over the logged turns of the endpoint in force, in ms after
the last speech sample (the stamps' origin: the device's capture block, its
uplink, is inside them), each per turn from the record's stamps:

- endpoint: the endpoint decision (vad: the hold, counted from the VAD's
  first silence frame);
- final: the final transcript; start: the LLM request (vad: on the
  speculative final, during the hold; semantic: on the final, while the
  detector scores it); hops = start - final;
- ttft: request -> first token; tts: first token -> first audio *ready*
  (`audio_ready_ms`: before a preemptive reply waits for its verdict);
- playback: from max(verdict, audio ready) to the first audio handed to the
  speaker (the final caption is awaited, then the write);
- semantic: each turn's verdict (the detector's hold, how long the final
  waited for its score).

Schedule (the engine's: `voxcli.chat.preempt`, `voxcli.chat.turn_gate`):

    vad, preemptive:  max(endpoint, start + ttft + tts) + playback
    vad, not:         final + hops + ttft + tts
    semantic, per turn, verdict = final + score wait:
      hold passed at the verdict (any score): max(verdict, start + ttft + tts) + playback
      complete, hold later (a short-hold tier): max(hold, start + ttft + tts) + playback
      mid-phrase, hold later: the early reply is dropped; hold + hops + ttft + tts (a new reply)

and the median over the turns (semantic: one path per logged verdict). Pure:
`voxcli.bench.ledger_measure` reads the log.
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any, Final, Iterable, Sequence

from voxcli.bench.ledger_engine import EngineModel, EnginePrediction, TurnPath

GATED_SLACK_MS: Final = 10.0
"""An old record (no `audio_ready_ms`) whose first audio came within this of its verdict waited for it: its
token -> audio is not the TTS term."""


@dataclass(frozen=True)
class Verdict:
    """The detector on one turn: the hold it chose (from the last speech sample) and the final's wait for it."""

    hold_ms: float
    score_ms: float
    complete: bool
    """At or above the detector's threshold: the early reply is kept (it waits for the hold, if any)."""


@dataclass(frozen=True)
class LoggedTerms:
    """Medians of the logged turns (see the module docstring); None where no turn measured it."""

    turns: int
    endpoint_ms: float | None
    final_ms: float | None
    start_ms: float | None
    llm_ttft_ms: float | None
    tts_ms: float | None
    playback_ms: float
    preemptive: bool
    """Most of the turns started their reply before the endpoint (vad: on the speculative final)."""
    tts_from: str
    """Where tts_ms came from: "audio ready" | "ungated turns" | "" (none: the caller supplies one)."""

    @property
    def hops_ms(self) -> float:
        if self.start_ms is None or self.final_ms is None:
            return 0.0
        return max(0.0, self.start_ms - self.final_ms)

    def to_dict(self) -> dict[str, Any]:
        d = {k: (round(v, 2) if isinstance(v, float) else v) for k, v in asdict(self).items()}
        return {**d, "hops_ms": round(self.hops_ms, 2)}


def _num(rec: dict[str, Any], key: str) -> float | None:
    v = rec.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _median(values: Iterable[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return float(statistics.median(xs)) if xs else None


def _gate(rec: dict[str, Any]) -> float | None:
    """When the first audio was allowed to play: the endpoint and the final caption (vad), the final and its
    score (semantic); None for a reply that did not wait (not preemptive, or held and asked again)."""
    final, det = _num(rec, "asr_final_ms"), rec.get("detector") or {}
    if det:
        if det.get("held") or final is None:
            return None
        return final + float(det.get("score_ms") or 0.0)
    endpoint = _num(rec, "endpoint_ms")
    if not rec.get("preemptive") or endpoint is None:
        return None
    return max(endpoint, final if final is not None else endpoint)


def _tts(rec: dict[str, Any]) -> tuple[float | None, str]:
    token, audio, ready = (_num(rec, k) for k in ("llm_first_token_ms", "first_audio_ms", "audio_ready_ms"))
    request = _num(rec, "llm_request_ms")
    if token is None or audio is None or (request is not None and token < request):
        return None, ""  # a token of an earlier, dropped reply (records before the stamps were cleared)
    if ready is not None:
        return max(0.0, ready - token), "audio ready"
    gate = _gate(rec)
    if gate is not None and audio <= gate + GATED_SLACK_MS:
        return None, ""  # it waited for the verdict: token -> audio is not the TTS's
    return max(0.0, audio - token), "ungated turns"


def logged_terms(records: Sequence[dict[str, Any]]) -> LoggedTerms:
    """The terms of these turn records (one endpoint mode), medians; see the module docstring."""
    recs = [r for r in records if _num(r, "first_audio_ms") is not None]
    fresh = [r for r in recs if not (r.get("detector") or {}).get("held")]  # held turns: their own hold
    ttft, tts, sources, playback = [], [], set(), []
    for r in recs:
        req, tok = _num(r, "llm_request_ms"), _num(r, "llm_first_token_ms")
        if req is not None and tok is not None and tok >= req:
            ttft.append(tok - req)
        t, src = _tts(r)
        if t is not None:
            tts.append(t)
            sources.add(src)
        gate, audio, ready = _gate(r), _num(r, "first_audio_ms"), _num(r, "audio_ready_ms")
        if gate is not None and audio is not None and (ready is not None or audio <= gate + GATED_SLACK_MS):
            playback.append(max(0.0, audio - max(gate, ready if ready is not None else gate)))  # waited
    starts = [_num(r, "llm_request_ms") for r in fresh]
    pre = sum(1 for r in recs if r.get("preemptive"))
    return LoggedTerms(
        turns=len(recs), endpoint_ms=_median(_num(r, "endpoint_ms") for r in fresh),
        final_ms=_median(_num(r, "asr_final_ms") for r in fresh), start_ms=_median(starts),
        llm_ttft_ms=_median(ttft), tts_ms=_median(tts), playback_ms=_median(playback) or 0.0,
        preemptive=pre * 2 > len(recs),
        tts_from="audio ready" if "audio ready" in sources else min(sources, default=""))


def logged_verdicts(records: Sequence[dict[str, Any]], complete_hold_ms: float) -> list[Verdict]:
    """Each semantic turn's verdict from its record (`detector`); complete = a hold no longer than
    `complete_hold_ms` (the policy's hold for a complete thought)."""
    out = []
    for r in records:
        det = r.get("detector") or {}
        if isinstance(det.get("hold_ms"), (int, float)):
            hold = float(det["hold_ms"])
            out.append(Verdict(hold, float(det.get("score_ms") or 0.0), hold <= complete_hold_ms))
    return out


def _semantic_path(t: LoggedTerms, v: Verdict, chain: float) -> TurnPath:
    final = t.final_ms if t.final_ms is not None else 0.0
    verdict = final + v.score_ms
    start = final + t.hops_ms
    if v.hold_ms <= verdict or v.complete:  # the hold has passed when scored (any score), or a short wait
        release = max(verdict, v.hold_ms)
        return TurnPath(release, start, max(release, start + chain) + t.playback_ms, v.hold_ms,
                        "verdict" if v.hold_ms <= verdict else "hold")
    return TurnPath(v.hold_ms, v.hold_ms + t.hops_ms, v.hold_ms + t.hops_ms + chain, v.hold_ms, "hold")


def predict_logged(t: LoggedTerms, endpoint: str, *, verdicts: Sequence[Verdict] = (), tts_ms: float | None = None,
                   extra_legs_ms: float = 0.0, seed_total_ms: float = 0.0) -> EnginePrediction:
    """First reply audio per turn on the engine's schedule, from these logged terms.

    `tts_ms`: the TTS term when no turn measured it (vad records without `audio_ready_ms`);
    `extra_legs_ms`: network legs the logged on-device turns did not have (downlink, a longer uplink)."""
    tts = t.tts_ms if t.tts_ms is not None else tts_ms
    if tts is None or t.llm_ttft_ms is None or t.final_ms is None:
        raise ValueError("the turn log lacks the final, first token or first audio of every turn")
    chain = t.llm_ttft_ms + tts
    if endpoint == "vad":
        release = t.endpoint_ms if t.endpoint_ms is not None else t.final_ms
        if t.preemptive and t.start_ms is not None:
            paths = [TurnPath(release, t.start_ms, max(release, t.start_ms + chain) + t.playback_ms)]
        else:
            paths = [TurnPath(release, t.final_ms + t.hops_ms, t.final_ms + t.hops_ms + chain)]
        model = EngineModel("vad", t.preemptive)
    else:
        if not verdicts:
            raise ValueError("the semantic endpoint needs the detector's verdicts")
        paths = [_semantic_path(t, v, chain) for v in verdicts]
        model = EngineModel("semantic", True, tuple(v.hold_ms for v in verdicts),
                            float(statistics.median(v.score_ms for v in verdicts)))
    shifted = tuple(TurnPath(p.release_ms, p.reply_start_ms, p.first_audio_ms + extra_legs_ms, p.hold_ms,
                             p.released_by) for p in paths)
    return EnginePrediction(model, shifted, seed_total_ms)
