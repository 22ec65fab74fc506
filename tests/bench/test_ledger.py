"""The turn-latency model, the seed's knobs and experiments, the frontier and the schedule check.

The model tests are pure (scripted inputs, exact numbers); the frontier and the
overlap are also measured once on real speech with the real recognizer.
"""
from __future__ import annotations

import pytest

from voxcli.bench.ledger import TERMS, TurnBudget, compute, sensitivity, total_ms
from voxcli.bench.ledger_knobs import (
    NETWORKS,
    PRESET_SOURCES,
    PRESETS,
    Knobs,
    asr_tail_parts,
    derive,
    experiments,
    turn_ms,
)
from voxcli.bench.ledger_schedule import schedule


def preset(name: str) -> TurnBudget:
    from voxcli.bench.ledger_knobs import preset as knobs_preset

    return derive(knobs_preset(name))


def test_default_knobs_reproduce_the_seeds_1045_ms_turn():
    b = preset("default")
    assert b == TurnBudget(95, 250, 350, 30, 375, 100, 95)
    assert total_ms(b) == 1045.0
    assert compute(b).total_ms == 1045.0
    assert Knobs() == PRESETS["default"]
    assert Knobs().chunk_ms == 140.0 and Knobs().agreement == 2 and Knobs().first_chunk_words == 1


def test_every_preset_and_network_has_a_documented_source():
    assert set(PRESET_SOURCES) == set(PRESETS)
    assert all(len(s) > 50 for s in PRESET_SOURCES.values())
    assert all(len(n.source) > 80 for n in NETWORKS.values())


# --- the seed's four experiments (Chapter 6), one test each --------------------------


def test_experiment_1_chunk_size_does_nothing_once_the_hold_is_the_max():
    totals = {c: turn_ms(Knobs(chunk_ms=c)) for c in range(40, 150, 10)}  # 14 -> 4 frames
    assert totals[140] == 1045.0 and totals[40] < totals[140]
    # "It barely moves at the bottom of the range": below the 250 ms hold the recognizer is free.
    assert {totals[c] for c in range(40, 100, 10)} == {945.0}
    assert all(derive(Knobs(chunk_ms=c)).asr_tail_ms <= 250 for c in range(40, 100, 10))
    # "Now raise the endpoint hold to 500 ms and repeat: chunk size now does nothing at all."
    assert {turn_ms(Knobs(chunk_ms=c, endpoint_ms=500)) for c in range(40, 150, 10)} == {1195.0}
    assert sensitivity(derive(Knobs(endpoint_ms=500)))["asr_tail_ms"] == 0.0


def test_experiment_2_first_chunk_1_to_12_words_adds_about_440_ms():
    one, twelve = turn_ms(Knobs(first_chunk_words=1)), turn_ms(Knobs(first_chunk_words=12))
    assert twelve - one == pytest.approx(440.0, abs=20)
    # nothing else changed: only the TTS first audio term moved
    a, b = derive(Knobs(first_chunk_words=1)), derive(Knobs(first_chunk_words=12))
    assert [t for t in TERMS if getattr(a, t) != getattr(b, t)] == ["tts_first_audio_ms"]


def test_experiment_3_n3_with_a_30_frame_chunk_blows_past_1400_ms():
    k = Knobs(agreement=3, chunk_ms=300)
    parts = asr_tail_parts(k)
    assert parts["chunk_ms"] == 300.0 and parts["stability_ms"] == 600.0  # "300 ms of chunk plus 600 ms"
    led = compute(derive(k))
    assert led.critical_parallel == "asr_tail_ms"  # "blowing well past the endpoint hold"
    assert led.total_ms > 1400.0 and led.to_dict()["within_limit"] is False


def test_experiment_4_telephony_worst_case_is_past_2_5_s():
    k = PRESETS["telephony"]
    assert k.network == "telephony" and k.agreement == 3 and k.endpoint_ms >= 1000
    assert turn_ms(k) > 2500.0
    # the network alone (default knobs) stays a different, smaller number: the worst case needs all three
    assert turn_ms(Knobs(network="telephony")) < 1400.0 < turn_ms(k)
    assert all(e.holds for e in experiments())
    assert [e.name for e in experiments()] == ["find the max", "first chunk", "cost of stability",
                                               "telephony worst case"]


def test_knobs_reject_nonsense():
    with pytest.raises(ValueError, match="unknown network 'moon'"):
        Knobs(network="moon")
    with pytest.raises(ValueError, match="chunk"):
        Knobs(chunk_ms=0)
    with pytest.raises(ValueError, match="agreement"):
        Knobs(agreement=0)
    with pytest.raises(ValueError, match="first chunk"):
        Knobs(first_chunk_words=0)


# --- the engine's real overlap --------------------------------------------------------


def test_a_late_hold_start_moves_the_parallel_branch():
    b = TurnBudget(0, 500, 100, 0, 0, 0, 0, asr_start_ms=250, endpoint_start_ms=30)
    assert total_ms(b) == 530.0 and b.overlap_ms == 100.0
    led = compute(b)
    seg = {s.term: s for s in led.segments}
    assert (seg["endpoint_ms"].start_ms, seg["endpoint_ms"].end_ms) == (30.0, 530.0)
    assert led.critical_parallel == "endpoint_ms" and seg["asr_tail_ms"].slack_ms == 180.0
    assert "the hold starts at 30 ms and the ASR tail at 250 ms" in " ".join(led.explain())
    assert b.to_dict()["endpoint_start_ms"] == 30


def test_a_tail_that_waits_for_the_hold_is_paid_in_full():
    parallel = TurnBudget(0, 500, 100, 0, 0, 0, 0)
    serial = TurnBudget(0, 500, 100, 0, 0, 0, 0, asr_start_ms=560)
    assert total_ms(parallel) == 500.0 and parallel.overlap_ms == 100.0
    assert total_ms(serial) == 660.0 and serial.overlap_ms == 0.0 and serial.possible_overlap_ms == 100.0
    led = compute(serial)
    seg = {s.term: s for s in led.segments}
    assert seg["asr_tail_ms"].start_ms == 560.0 and seg["endpoint_ms"].critical and seg["asr_tail_ms"].critical
    text = " ".join(led.explain())
    assert "0 of a possible 100 ms" in text and "would save 160 ms" in text
    assert led.to_dict()["overlap"]["parallel_end_ms"] == 660.0
    assert "asr_start_ms" not in parallel.to_dict() and serial.to_dict()["asr_start_ms"] == 560


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(ValueError, match="default, webrtc, telephony"):
        preset("satellite")
    with pytest.raises(ValueError, match="unknown network"):
        Knobs(network="satellite")


def test_parallel_branch_only_the_longer_one_counts():
    b = preset("default")
    # Endpoint hold is the shorter branch: shrinking it to 0 or growing it to 350 changes nothing.
    assert total_ms(b.with_overrides(endpoint_ms=0)) == 1045.0
    assert total_ms(b.with_overrides(endpoint_ms=350)) == 1045.0
    # Past the ASR tail it becomes the critical branch and every extra ms counts.
    assert total_ms(b.with_overrides(endpoint_ms=400)) == 1095.0


def test_waterfall_segments_share_one_time_axis():
    led = compute(preset("default"))
    seg = {s.term: s for s in led.segments}
    assert [s.term for s in led.segments] == list(TERMS)
    assert seg["endpoint_ms"].start_ms == seg["asr_tail_ms"].start_ms == 95.0
    assert seg["asr_tail_ms"].critical and not seg["endpoint_ms"].critical
    assert seg["endpoint_ms"].slack_ms == 100.0 and seg["asr_tail_ms"].slack_ms == 0.0
    assert seg["hops_ms"].start_ms == 445.0  # after the longer branch, not the sum of both
    assert seg["downlink_ms"].end_ms == led.total_ms == 1045.0
    assert led.critical_parallel == "asr_tail_ms"
    assert led.dominant == "llm_ttft_ms"


def test_explanation_names_the_critical_branch_and_the_dominant_term():
    text = " ".join(compute(preset("default")).explain())
    assert "ASR tail is on the critical path; shortening the endpoint hold gains nothing" in text
    assert "exceeds 350 ms" in text
    assert "LLM first token is the largest term" in text
    assert "within the 1,400 ms limit" in text
    over = " ".join(compute(preset("default").with_overrides(llm_ttft_ms=900)).explain())
    assert "170 ms over the 1,400 ms limit" in over


def test_sensitivity_is_zero_for_the_non_critical_branch():
    s = sensitivity(preset("default"))
    assert s["endpoint_ms"] == 0.0
    assert s["asr_tail_ms"] == 100.0
    for term in ("uplink_ms", "hops_ms", "llm_ttft_ms", "tts_first_audio_ms", "downlink_ms"):
        assert s[term] == min(100.0, getattr(preset("default"), term))
    # hops are only 30 ms: removing all of them gains 30, not 100
    assert s["hops_ms"] == 30.0


def test_sensitivity_of_close_parallel_branches_is_partial():
    b = preset("default").with_overrides(endpoint_ms=300)
    s = sensitivity(b)
    assert s["asr_tail_ms"] == 50.0  # 350 -> 250, but the hold still takes 300
    assert s["endpoint_ms"] == 0.0
    tie = sensitivity(b.with_overrides(endpoint_ms=350))
    assert tie["asr_tail_ms"] == tie["endpoint_ms"] == 0.0
    assert compute(b.with_overrides(endpoint_ms=350)).critical_parallel is None


def test_negative_or_nan_terms_are_rejected():
    with pytest.raises(ValueError, match="uplink_ms"):
        TurnBudget(-1, 0, 0, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="hops_ms"):
        TurnBudget(0, 0, 0, float("nan"), 0, 0, 0)


def test_schedule_rtf_0_3_is_safe():
    s = schedule([3, 8, 16], rtf=0.3, overhead_s=0.060, wpm=150)
    assert [c.audio_s for c in s.chunks] == pytest.approx([1.2, 3.2, 6.4])
    assert [c.ready_s for c in s.chunks] == pytest.approx([0.42, 1.44, 3.42])
    assert s.first_audio_s == pytest.approx(0.42)
    assert s.chunks[1].slack_s == pytest.approx(0.18)  # chunk 1 plays until 1.62 s
    assert s.chunks[2].slack_s == pytest.approx(4.82 - 3.42)
    assert s.safe and s.underruns == []
    assert s.end_s == pytest.approx(0.42 + 1.2 + 3.2 + 6.4)


def test_schedule_rtf_0_9_leaves_a_1_74_s_hole_after_the_first_chunk():
    s = schedule([3, 8, 16], rtf=0.9, overhead_s=0.060, wpm=150)
    first, second, third = s.chunks
    assert first.ready_s == pytest.approx(1.14)
    assert first.play_end_s == pytest.approx(2.34)
    assert second.ready_s == pytest.approx(4.08)
    assert second.underrun_s == pytest.approx(1.74)
    assert second.slack_s == pytest.approx(-1.74)
    assert not s.safe
    # the hole shifts playback; chunk 3 (ready 9.90 s) misses chunk 2's end (7.28 s) too
    assert third.underrun_s == pytest.approx(9.90 - 7.28)
    assert [c.index for c in s.underruns] == [1, 2]


def test_schedule_rejects_bad_input():
    with pytest.raises(ValueError):
        schedule([3, 0], rtf=0.3, overhead_s=0.06)
    with pytest.raises(ValueError):
        schedule([3], rtf=0.3, overhead_s=0.06, wpm=0)


# --- latency vs flicker ----------------------------------------------------------------

SEED_HYPS = [(200.0, "i'd like to".split()), (400.0, "i'd like to prove".split()),
             (600.0, "i'd like to move my".split()), (800.0, "i'd like to move my flight".split()),
             (1000.0, "i'd like to move my flight to".split())]


def test_replay_scores_the_seeds_chapter_4_table():
    from voxcli.bench.ledger_frontier import replay

    naive = replay(SEED_HYPS, 1)  # Policy A: "prove" emitted at 0.4 s, retracted at 0.6 s; 7 words
    assert naive.retracted == 1 and naive.final_words == 7 and naive.commit_delay_ms == 0.0
    la2 = replay(SEED_HYPS, 2)  # Policy B: zero retractions, every word waited exactly one update
    assert la2.retracted == 0 and la2.commit_delay_ms == 200.0
    assert replay(SEED_HYPS, 3).commit_delay_ms == 400.0


def test_frontier_on_real_speech_trades_delay_for_flicker(real_cache):
    from voxcli.bench.ledger_frontier import frontier, measure_hypotheses

    hyps, info = measure_hypotheses(200.0, max_s=6.0)
    assert info["decodes"] == len(hyps) == 30 and all(isinstance(w, list) for _, w in hyps)
    points = frontier(hyps, 200.0, [200.0, 400.0], [1, 2, 3], Knobs())
    by = {(p.agreement, p.chunk_ms): p for p in points}
    assert len(points) == 6 and any(p.pareto for p in points)
    for c in (200.0, 400.0):  # more agreement: never more flicker, always more delay and a longer turn
        assert by[(1, c)].flicker >= by[(2, c)].flicker >= by[(3, c)].flicker
        assert by[(1, c)].turn_ms < by[(2, c)].turn_ms < by[(3, c)].turn_ms
    assert by[(1, 200.0)].retracted > 0  # the naive policy flickers on a real recognizer
    with pytest.raises(ValueError, match="multiple"):
        frontier(hyps, 200.0, [300.0], [1], Knobs())


def test_overlap_is_measured_on_the_installed_streamer(real_cache):
    from voxcli.bench.ledger_overlap import measure_overlap

    o = measure_overlap(hold_ms=300, agreement=2, step_ms=500, runs=1)
    # the endpoint can fire no earlier than the hold; the decode is a real, positive time
    assert o.confirm_ms >= 300 * 0.9 and o.final_ms >= o.confirm_ms - 1 and 0 < o.tail_ms < 2000
    assert 0 <= o.overlap_ms <= o.possible_overlap_ms == min(300, o.tail_ms)
    assert o.asr_start_ms == pytest.approx(max(0.0, o.ready_ms - o.tail_ms))
    if o.speculative:  # the decode ran during the hold: the transcript existed before the endpoint fired
        assert o.ready_ms < o.confirm_ms and o.overlap_ms > 0
    else:  # the decode waited for the endpoint: nothing overlapped
        assert o.overlap_ms == 0.0
    b = TurnBudget(0, 300, o.tail_ms, 0, 0, 0, 0, asr_start_ms=o.asr_start_ms, endpoint_start_ms=o.hold_start_ms)
    assert total_ms(b) == pytest.approx(max(o.confirm_ms, o.ready_ms), abs=1.0)


def test_overlap_with_chats_second_pass_times_the_final_models_tail(real_cache):
    """Where chat decodes its finals on moonshine-base-en (two passes), the ledger's ASR tail is that model's."""
    from voxcli.asr.models import ACCURATE_ASR, DEFAULT_ASR
    from voxcli.bench.ledger_overlap import measure_overlap

    one = measure_overlap(hold_ms=300, agreement=2, step_ms=500, runs=1, model=DEFAULT_ASR)
    two = measure_overlap(hold_ms=300, agreement=2, step_ms=500, runs=1, model=DEFAULT_ASR, final_model=ACCURATE_ASR)
    assert (one.model, two.model) == (DEFAULT_ASR, f"{DEFAULT_ASR}+{ACCURATE_ASR}")
    assert 0 < one.tail_ms < 2000 and 0 < two.tail_ms < 2000 and two.final_ms >= two.confirm_ms - 1


def test_overlap_tells_a_serial_engine_from_one_that_decodes_during_the_hold(real_cache):
    """The same streamer with its final decode after the endpoint (the engine before #13) and during the hold."""
    from voxcli.bench.ledger_overlap import measure_overlap

    serial = measure_overlap(hold_ms=300, agreement=2, step_ms=500, runs=1, streamer_options={"speculative": False})
    assert not serial.speculative and serial.overlap_ms == 0.0 and serial.asr_start_ms >= 300 * 0.9
    parallel = measure_overlap(hold_ms=300, agreement=2, step_ms=500, runs=1, streamer_options={"speculative": True})
    assert parallel.speculative and parallel.overlap_ms > 0 and parallel.ready_ms < parallel.confirm_ms
    serial_turn = TurnBudget(0, 300, serial.tail_ms, 0, 0, 0, 0, asr_start_ms=serial.asr_start_ms)
    # the serial engine starts its decode at the endpoint, give or take the clock's few ms (the tolerance above)
    assert compute(serial_turn).to_dict()["overlap"]["overlap_ms"] <= 300 * 0.1
