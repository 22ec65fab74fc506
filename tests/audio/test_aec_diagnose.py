"""benchmarks/aec_diagnose.py on real speech: where the user started before a barge-in's onset, and the WER split.

The lead is what `aec_session.py words` splits the barging-in user's WER by (an onset ~60 ms into the
user's "It", or ~220 ms, on "was"); here the user's clip starts under a louder real voice (the Beckett
recording standing in for the reply) at a known sample, and the lead must come out to within a few ms.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from voxcli.audio.files import read_audio
from voxcli.audio.pcm import resample
from voxcli.bench.wer import word_errors

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "aec_diagnose.py"
_spec = importlib.util.spec_from_file_location("aec_diagnose", _BENCH)
diagnose = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules["aec_diagnose"] = diagnose
_spec.loader.exec_module(diagnose)  # type: ignore[union-attr]

RATE = 16000


@pytest.fixture(scope="module")
def user(speech_samples) -> np.ndarray:  # type: ignore[no-untyped-def]
    return diagnose.user_clip(RATE, speech_samples["two_cities"])


@pytest.mark.parametrize("lead_ms", [60, 220])
def test_the_lead_is_found_under_a_louder_voice(user: np.ndarray, speech_samples, lead_ms: int):
    reply, rate = read_audio(speech_samples["beckett"])
    reply = resample(reply, rate, RATE).astype(np.float64)
    start = 3 * RATE + 1234
    near = 2.0 * reply[: start + 4 * RATE]  # the "reply" 6 dB over the user's level, all along
    near = np.pad(near, (0, max(0, start + user.size - near.size)))
    near[start : start + user.size] += user
    onset = start + lead_ms * RATE // 1000
    got = diagnose.user_lead(near, onset, user, RATE)
    assert abs(got - lead_ms * RATE // 1000) <= RATE // 500  # within 2 ms


def test_the_split_names_both_groups_and_their_wer():
    said = "It was the best of times, it was the worst of times."
    errors = [word_errors(said, said), word_errors(said, said.replace("the best", "best")),
              word_errors(said, said)]
    line = diagnose.split_by_lead([60.0, 220.0, 70.0], errors)
    assert "detected early" in line and "over 2" in line and "WER 0.000" in line
    assert "detected late" in line and "over 1" in line and f"WER {1 / 12:.3f}" in line
    assert "late" not in diagnose.split_by_lead([60.0], errors[:1])
