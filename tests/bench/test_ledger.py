"""The turn-latency model and the chunk schedule check (pure: scripted inputs, exact numbers)."""
from __future__ import annotations

import pytest

from voxcli.bench.ledger import (
    PRESETS,
    TERMS,
    TurnBudget,
    compute,
    preset,
    schedule,
    sensitivity,
    total_ms,
)


def test_default_preset_totals_1045_ms():
    b = preset("default")
    assert b == TurnBudget(95, 250, 350, 30, 375, 100, 95)
    assert total_ms(b) == 1045.0
    assert compute(b).total_ms == 1045.0


def test_every_preset_has_a_documented_source():
    from voxcli.bench.ledger import PRESET_SOURCES

    assert set(PRESET_SOURCES) == set(PRESETS)
    assert all(len(s) > 80 for s in PRESET_SOURCES.values())


def test_unknown_preset_names_the_known_ones():
    with pytest.raises(ValueError, match="default, webrtc, telephony"):
        preset("satellite")


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
