"""Issue 13: `ledger --measured` predicts chat's turn from the terms its turn log measured, on the schedule the
engine runs (vad: the reply prepared during the hold; semantic: short hold, final, score, LLM, TTS in series).

Input: the turn records of the lead's quiet run (2026-12-01 17:31, `bench_turn.py --turns 10 --rounds 5
--endpoint vad --endpoint semantic`), written through chat's own `make_record`: deterministic, no timing."""
from __future__ import annotations

import json
import statistics

import pytest

from voxcli.bench.ledger_turns import Verdict, logged_terms, logged_verdicts, predict_logged
from voxcli.chat.turnlog import TurnClock, make_record

# endpoint, final, request, first token, first audio (ms after the last speech sample)
VAD = [(544, 544, 249, 270, 544), (556, 556, 276, 297, 558), (540, 541, 279, 328, 541), (539, 539, 269, 320, 543),
       (557, 558, 247, 303, 558), (542, 543, 280, 302, 544), (562, 566, 254, 308, 566), (556, 557, 268, 290, 558),
       (545, 546, 271, 321, 546), (564, 565, 276, 327, 569)]
# ... + the detector's (score, hold_ms, score_ms, held); two turns held mid-phrase, asked again at their hold
SEMANTIC = [((209, 247, 250, 272, 394), (0.869, 200, 60, 0)), ((231, 274, 276, 298, 452), (0.796, 200, 57, 0)),
            ((1249, 244, 1250, 295, 1387), (0.006, 1200, 55, 1)), ((228, 266, 270, 320, 451), (0.100, 200, 57, 0)),
            ((405, 246, 406, 460, 619), (0.025, 401, 56, 1)), ((236, 281, 283, 325, 450), (0.603, 200, 78, 0)),
            ((221, 252, 254, 304, 451), (0.089, 200, 56, 0)), ((230, 268, 269, 293, 433), (0.721, 200, 55, 0)),
            ((197, 234, 237, 286, 410), (0.395, 200, 55, 0)), ((241, 275, 277, 337, 477), (0.608, 200, 70, 0))]
MEASURED_P50 = {"vad": 552.0, "semantic": 451.0}


def record(stamps: tuple[float, ...], *, preemptive: bool = True, detector: dict | None = None,
           audio_ready: float | None = None) -> dict:
    """One turn record; without `audio_ready` as the 17:31 run logged it (before the `audio_ready_ms` stamp)."""
    endpoint, final, request, token, audio = (s / 1000.0 for s in stamps)
    clock = TurnClock(speech_end=0.0, endpoint=endpoint, asr_final=final, llm_request=request,
                      llm_first_token=token, first_audio=audio,
                      audio_ready=None if audio_ready is None else audio_ready / 1000.0)
    rec = make_record(0, clock, user="q", assistant="a", interrupted=False, cut_off=False, llm="local",
                      preemptive=preemptive, detector=detector)
    doc = json.loads(rec.to_json())  # as `read_turns` gives it back
    if audio_ready is None:
        del doc["audio_ready_ms"]
    return doc


def semantic_records() -> list[dict]:
    return [record(s, preemptive=not held, detector={"score": sc, "hold_ms": hold, "score_ms": ms, "held": held})
            for s, (sc, hold, ms, held) in SEMANTIC]


def within(predicted: float, measured: float, pct: float = 15.0) -> bool:
    return abs(predicted - measured) / measured * 100.0 <= pct


def test_vad_turn_is_the_hold_when_the_reply_was_ready_during_it() -> None:
    recs = [record(s) for s in VAD]
    t = logged_terms(recs)
    # the first token -> first audio of these turns is their wait for the endpoint: not a TTS term
    assert t.tts_ms is None and t.preemptive
    assert t.start_ms == pytest.approx(270.0) and t.endpoint_ms == pytest.approx(550.5)
    p = predict_logged(t, "vad", tts_ms=140.0)
    assert p.turns[0].reply_start_ms < p.turns[0].release_ms  # asked during the hold
    assert p.total_ms == pytest.approx(550.5 + t.playback_ms)  # max(hold, 270 + 49.5 + 140) + playback
    assert within(p.total_ms, MEASURED_P50["vad"])
    # what the ledger did before: the gated token -> audio (the wait for the endpoint) added after the
    # speculative final made the reply chain, not the hold, look like the critical path
    gated = statistics.median(r["terms"]["tts_first_audio_ms"] for r in recs)
    assert t.start_ms + t.llm_ttft_ms + gated > t.endpoint_ms


def test_vad_turn_is_the_reply_chain_when_it_outlasts_the_hold() -> None:
    """With the audio-ready stamp the TTS term is measured; a chain longer than the hold is the turn."""
    slow = [record((544, 544, 270, 470, 700), audio_ready=680.0) for _ in range(3)]
    t = logged_terms(slow)
    assert t.tts_ms == pytest.approx(210.0) and t.tts_from == "audio ready" and t.playback_ms == pytest.approx(20.0)
    p = predict_logged(t, "vad")
    assert p.total_ms == pytest.approx(270 + 200 + 210 + 20)


def test_semantic_turn_follows_short_hold_final_score_llm_tts_in_series() -> None:
    recs = semantic_records()
    t = logged_terms(recs)
    verdicts = logged_verdicts(recs, complete_hold_ms=200.0)
    assert [v.complete for v in verdicts] == [True, True, False, True, False, True, True, True, True, True]
    p = predict_logged(t, "semantic", verdicts=verdicts)
    complete = t.final_ms + t.hops_ms + t.llm_ttft_ms + t.tts_ms  # the score (~57 ms) ran beside the LLM
    assert [x.released_by for x in p.turns].count("verdict") == 8
    assert all(x.first_audio_ms == pytest.approx(complete) for x, v in zip(p.turns, verdicts) if v.complete)
    assert p.total_ms == pytest.approx(complete)
    assert within(p.total_ms, MEASURED_P50["semantic"])
    # the two turns held mid-phrase: their hold, then a new reply (measured 1,387 and 619 ms)
    held = [x.first_audio_ms for x, v in zip(p.turns, verdicts) if not v.complete]
    assert within(held[0], 1387.0, 5.0) and within(held[1], 619.0, 10.0)


def test_a_verdict_slower_than_the_reply_chain_is_the_turn() -> None:
    t = logged_terms(semantic_records())
    slow = [Verdict(200.0, 400.0, True)]
    p = predict_logged(t, "semantic", verdicts=slow)
    assert p.total_ms == pytest.approx(t.final_ms + 400.0 + t.playback_ms)
    # a longer hold that had passed by the time the score came (a loaded detector): released at the
    # verdict with the early reply, as the gate does, not asked again
    late = predict_logged(t, "semantic", verdicts=[Verdict(401.0, 400.0, False)])
    assert late.turns[0].released_by == "verdict" and late.total_ms == pytest.approx(t.final_ms + 400.0 + t.playback_ms)


def test_a_dropped_replys_stamps_are_not_the_turns_terms() -> None:
    """A held turn logged before the drop cleared its clock: its first token (295 ms) is the dropped early reply's,
    before the new request (1,250 ms). Neither it nor its 1,092 ms "TTS" enters the medians."""
    recs = semantic_records()
    assert recs[2]["terms"]["llm_ttft_ms"] == 0.0 and recs[2]["terms"]["tts_first_audio_ms"] == 1092.0
    t = logged_terms(recs)
    assert t.llm_ttft_ms == pytest.approx(statistics.median([22, 22, 50, 42, 50, 24, 49, 60, 54]))
    assert t.tts_ms < 200.0


def test_network_legs_the_device_did_not_have_are_added_and_bad_input_is_refused() -> None:
    t = logged_terms([record(s) for s in VAD])
    base = predict_logged(t, "vad", tts_ms=140.0).total_ms
    assert predict_logged(t, "vad", tts_ms=140.0, extra_legs_ms=95.0).total_ms == pytest.approx(base + 95.0)
    with pytest.raises(ValueError, match="first audio"):
        predict_logged(t, "vad")  # no TTS term measured and none given
    with pytest.raises(ValueError, match="verdicts"):
        predict_logged(logged_terms(semantic_records()), "semantic")
