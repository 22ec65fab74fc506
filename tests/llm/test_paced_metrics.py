"""tokens/s of a stream whose reader paused (chat's TTS push-back) is the model's speed, not the speech's."""
from __future__ import annotations

import pytest

from voxcli.llm.base import make_metrics, paced_metrics


def test_the_wait_of_the_reader_is_not_decode_time() -> None:
    # 21 tokens: first at 0.5 s, last at 10.5 s, of which the reader waited 8 s for the speech
    m = make_metrics(t_start=0.0, t_first=0.5, t_end=10.5, prompt_tokens=30, tokens=21)
    assert m["tokens_per_s"] == pytest.approx(2.0)  # what the generator's clock saw
    p = paced_metrics(m, 8.0)
    assert p["tokens_per_s"] == pytest.approx(10.0) and p["paced_s"] == 8.0
    assert p["total_s"] == m["total_s"] and p["ttft_s"] == m["ttft_s"]  # the wall times stay as they were
    assert "paced_s" not in m  # a copy


def test_no_wait_leaves_the_metrics_alone() -> None:
    m = make_metrics(t_start=0.0, t_first=0.5, t_end=2.5, prompt_tokens=30, tokens=21)
    assert paced_metrics(m, 0.0) == m


def test_a_wait_as_long_as_the_decode_keeps_the_measured_speed() -> None:
    """Clock noise can make the wait reach the decode time: no division by zero or negative speed."""
    m = make_metrics(t_start=0.0, t_first=0.5, t_end=2.5, prompt_tokens=30, tokens=21)
    assert paced_metrics(m, 2.0)["tokens_per_s"] == m["tokens_per_s"]
    assert paced_metrics({"tokens": 1.0, "total_s": 1.0, "ttft_s": 1.0, "tokens_per_s": 1.0}, 0.5)["tokens_per_s"] == 1.0
