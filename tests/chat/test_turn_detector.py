"""Semantic end of turn (issue 13, item 3): the on-device SmolLM2 scores the words so far.

The labelled set is tests/chat/turn_prefixes.py (81 complete utterances, 81 mid-phrase prefixes).
"""
from __future__ import annotations

import pytest

from tests.chat.turn_prefixes import COMPLETE, INCOMPLETE
from voxcli.chat.turn import PendingTurn
from voxcli.chat.turn_detector import HoldPolicy, normalize
from voxcli.chat.turn_gate import TurnGate
from voxcli.chat.turnlog import TurnClock


@pytest.fixture(scope="module")
def detector(real_cache_module):
    from voxcli.chat.turn_detector import load_turn_detector

    return load_turn_detector(threads=1)


def test_the_labelled_set_is_large_and_balanced():
    assert len(COMPLETE) + len(INCOMPLETE) >= 150
    assert abs(len(COMPLETE) - len(INCOMPLETE)) <= 5
    assert not set(map(str.lower, COMPLETE)) & set(map(str.lower, INCOMPLETE))


def test_precision_and_recall_on_the_labelled_set(detector):
    """No reply would start on a mid-phrase prefix (precision 1.0); >= 90 % of complete thoughts are seen."""
    thr = detector.policy.threshold
    said_complete = [detector.score(t) >= thr for t in COMPLETE]
    false_alarms = [t for t in INCOMPLETE if detector.score(t) >= thr]
    assert false_alarms == []
    assert sum(said_complete) / len(COMPLETE) >= 0.90


def test_precision_and_recall_held_out(detector):
    """The shipped threshold was tuned on the whole labelled set; here each third of it is held out in turn,
    the threshold re-tuned on the rest by the same rule, and the held-out third counted (3-fold).

    Measured (SmolLM2-135M, 1 thread): folds tune 0.03, 0.015, 0.03; held-out precision 1.000 / 0.963 / 1.000
    (the fold without "So what I want to know is" in its tuning part tunes lower and lets it through), recall
    0.963 / 0.963 / 1.000; pooled precision 0.988, recall 0.975."""
    from tests.chat.turn_prefixes import cross_validate

    folds = cross_validate([detector.score(t) for t in COMPLETE], [detector.score(t) for t in INCOMPLETE])
    tp, fp = sum(f["tp"] for f in folds), sum(f["fp"] for f in folds)
    n = sum(f["n_complete"] for f in folds)
    assert n == len(COMPLETE) and sum(f["n_incomplete"] for f in folds) == len(INCOMPLETE)
    assert tp / (tp + fp) >= 0.95 and tp / n >= 0.90  # pooled over the held-out thirds
    for f in folds:  # no held-out third lets more than one mid-phrase prefix through
        assert f["fp"] <= 1 and f["tp"] / f["n_complete"] >= 0.85
    assert sorted(f["threshold"] for f in folds)[1] == detector.policy.threshold  # most folds agree with it


def test_the_hold_is_short_after_a_thought_and_long_mid_phrase(detector):
    p = detector.policy
    assert detector.hold_ms("What is the capital of France") == p.min_ms
    assert detector.hold_ms("I'd like to order a") > 0.9 * p.max_ms
    assert detector.hold_ms("So, uh") == p.max_ms  # a filler: still thinking


def test_asr_punctuation_does_not_decide(detector):
    """An ASR's guessed full stop on a cut-off phrase changes nothing: it is stripped before scoring."""
    assert normalize(" I'd like to  order a. ") == "I'd like to order a"
    assert detector.score("I'd like to order a.") == detector.score("I'd like to order a")
    assert detector.score("") == 0.0


def test_hold_policy_ramp():
    p = HoldPolicy(threshold=0.1, min_ms=200, max_ms=1200)
    assert p.hold_ms(0.5) == 200 and p.hold_ms(0.0) == 1200 and p.hold_ms(0.025) == 1200
    assert p.hold_ms(0.0625) == pytest.approx(700)
    with pytest.raises(ValueError):
        HoldPolicy(min_ms=500, max_ms=100)


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_gate_joins_a_pause_mid_phrase_into_one_turn(detector):
    """ "I'd like to order a" ... "pizza": held, the user goes on, one turn with both parts."""
    clock, out = _Clock(), []
    gate = TurnGate(out.append, detector, clock)
    gate.final("I'd like to order a", TurnClock(speech_end=99.8, endpoint=100.0, asr_final=100.0))
    assert out == [] and gate.holding
    clock.t = 100.3
    assert gate.poll() is not None and out == []  # still within the long hold
    gate.speech_resumed()
    clock.t = 103.0
    assert gate.poll() is None and out == []  # the user speaks: no deadline
    gate.final("pizza.", TurnClock(speech_end=102.6, endpoint=102.8, asr_final=102.9))
    assert [p.text for p in out] == ["I'd like to order a pizza."] and not gate.holding
    assert gate.joined == 1 and gate.held_turns == 1


def test_gate_releases_a_held_turn_when_the_long_hold_passes(detector):
    clock, out = _Clock(), []
    gate = TurnGate(out.append, detector, clock)
    gate.final("Can you help me with", TurnClock(speech_end=99.8, endpoint=100.0, asr_final=100.0))
    clock.t = 99.8 + detector.hold_ms("Can you help me with") / 1000 + 0.001
    gate.poll()
    assert [p.text for p in out] == ["Can you help me with"] and out[0].clock.endpoint == clock.t


def test_gate_releases_a_complete_thought_at_once_and_vad_mode_always(detector):
    out: list[PendingTurn] = []
    TurnGate(out.append, detector, _Clock()).final("What is the capital of France?", TurnClock(speech_end=99.8))
    TurnGate(out.append, None, _Clock()).final("I'd like to order a", TurnClock(speech_end=99.8))
    assert [p.text for p in out] == ["What is the capital of France?", "I'd like to order a"]


def test_a_speech_frame_defers_the_release_until_a_start_can_be_confirmed(detector):
    clock, out = _Clock(), []
    gate = TurnGate(out.append, detector, clock)
    gate.final("I'd like to order a", TurnClock(speech_end=99.8))
    clock.t = 99.8 + detector.hold_ms("I'd like to order a") / 1000 - 0.01
    gate.speech_frame()  # the user starts again just before the long hold ends
    clock.t += 0.02
    assert gate.poll() is not None and out == []
    clock.t += 0.5  # only a click: nothing confirmed a start
    gate.poll()
    assert [p.text for p in out] == ["I'd like to order a"]


def test_resumed_speech_without_words_does_not_hold_forever(detector):
    clock, out = _Clock(), []
    gate = TurnGate(out.append, detector, clock)
    gate.final("Tell me about the", TurnClock(speech_end=99.8))
    gate.speech_resumed()
    clock.t = 101.0
    gate.speech_ended()  # a cough: no final follows
    clock.t = 103.0
    gate.poll()
    assert [p.text for p in out] == ["Tell me about the"]
