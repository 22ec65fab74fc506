"""Semantic end of turn (issue 13, item 3): the on-device SmolLM2 scores the words so far.

The labelled set is tests/chat/turn_prefixes.py (81 complete utterances, 81 mid-phrase prefixes).
"""
from __future__ import annotations

import pytest

from tests.chat.turn_prefixes import COMPLETE, INCOMPLETE
from voxcli.chat.turn import PendingTurn
from voxcli.chat.turn_detector import SEMANTIC_MIN_HOLD_MS, HoldPolicy, normalize
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


def test_no_mid_phrase_prefix_gets_a_thoughts_hold(detector):
    """The default policy has one hold for a complete thought, the streamer's own (`min_ms` == `complete_ms`,
    200 ms: no tier below the streamer's hold, which would make it finalise at shorter pauses of natural
    speech); no mid-phrase prefix of the labelled set gets it, most complete utterances do. The `confident`
    knob (a shorter tier if `min_ms` < `complete_ms`) keeps a wide margin over every mid-phrase score.
    Measured (SmolLM2-135M, 1 thread): highest mid-phrase score 0.029, 77 % of complete >= 0.1."""
    p = detector.policy
    incomplete = [detector.score(t) for t in INCOMPLETE]
    complete = [detector.score(t) for t in COMPLETE]
    assert p.min_ms == p.complete_ms == SEMANTIC_MIN_HOLD_MS == 200 < p.max_ms
    assert p.confident >= 3 * max(incomplete)  # a wide margin, not a tuned edge
    assert all(p.hold_ms(s) > p.complete_ms for s in incomplete)  # mid-phrase: always longer than a thought's
    assert sum(p.hold_ms(s) == p.min_ms for s in complete) / len(complete) >= 0.9


def test_hold_policy_tiers():
    p = HoldPolicy(threshold=0.04, min_ms=120, complete_ms=200, confident=0.1, max_ms=1200)
    assert p.hold_ms(0.5) == p.hold_ms(0.1) == 120 and p.hold_ms(0.05) == p.hold_ms(0.04) == 200
    assert p.hold_ms(0.01) == 1200 and p.hold_ms(0.025) == pytest.approx(700)  # the ramp ends at complete_ms
    assert HoldPolicy(threshold=0.2, confident=0.1).hold_ms(0.15) == pytest.approx(1200 - 1000 * (0.10 / 0.15))


class _GatedEngine:
    """The real SmolLM2 engine, whose `logits_for` waits until the test lets it go (and counts calls)."""

    def __init__(self, engine) -> None:
        import threading

        self.engine, self.tokenizer = engine, engine.tokenizer
        self.go, self.calls = threading.Event(), 0

    def logits_for(self, ids):
        self.calls += 1
        assert self.go.wait(60)
        return self.engine.logits_for(ids)


def test_one_text_scored_twice_at_once_is_computed_once(detector):
    """The review leftover: the prefetch of a speculative final and the final caption arrive together; the
    second caller waits for the first one's score instead of running a second prefill."""
    import threading
    import time

    from voxcli.chat.turn_detector import TurnDetector

    gated = _GatedEngine(detector.engine)
    det = TurnDetector(gated)
    got: list[float] = []
    first = threading.Thread(target=lambda: got.append(det.score("Where do penguins live?")))
    first.start()
    deadline = time.monotonic() + 60
    while gated.calls == 0 and time.monotonic() < deadline:  # the first caller is inside its prefill
        time.sleep(0.005)
    second = threading.Thread(target=lambda: got.append(det.score(" Where do penguins  live.")))  # same words
    second.start()
    job = det._inflight["Where do penguins live"]
    while job.waiters == 0 and time.monotonic() < deadline:  # the second caller waits on the first's job
        time.sleep(0.005)
    gated.go.set()
    first.join(60)
    second.join(60)
    assert gated.calls == det.computed == 1 and len(got) == 2 and got[0] == got[1]
    assert det.score("Where do penguins live") == got[0] and gated.calls == 1  # then the cache answers


def test_gate_keeps_the_early_reply_through_a_complete_thoughts_short_hold(detector):
    """A complete thought that is not a confident one waits `complete_ms`; the reply started early keeps
    running and is told at the release (nothing is put); a resumed speech drops it at once."""
    from voxcli.chat.turn_detector import TurnDetector

    det = TurnDetector(detector.engine, HoldPolicy(confident=1.0))  # every complete thought: complete_ms
    for resumed in (False, True):
        clock, out, told = _Clock(), [], []
        gate = TurnGate(out.append, det, clock)
        gate.start_early = lambda text, c: (lambda released, verdict: told.append(released) or released)
        clock.t = 99.8 + 0.15  # the final came 150 ms after the speech, before complete_ms (200)
        gate.final("What is the capital of France?", TurnClock(speech_end=99.8))
        assert told == [] and gate.holding and out == []
        if resumed:
            gate.speech_resumed()
            assert told == [False]  # the user goes on: the early reply is cancelled now
            continue
        clock.t = 99.8 + 0.19
        gate.poll()
        assert told == [] and gate.holding
        clock.t = 99.8 + 0.21
        assert gate.poll() is None
        assert told == [True] and out == [] and not gate.holding  # released into the early reply


def test_holds_are_judged_in_audio_heard_not_wall_time(detector):
    """On a loaded machine the streamer lags the mic: 1.3 s after "I'd like to order a" in wall time it may
    have heard only 0.5 s of the pause, the words after it still in its inbox. The long hold waits for the
    audio, so the turn is not released before the user's next words are heard."""
    clock, out = _Clock(), []
    heard = {"t": 100.3}
    gate = TurnGate(out.append, detector, clock, heard=lambda: heard["t"])
    clock.t = 101.1  # the final itself came late: the streamer is ~0.8 s behind
    gate.final("I'd like to order a", TurnClock(speech_end=99.8))
    assert gate.holding and out == []
    clock.t = 101.5  # the long hold (1.2 s) has passed in wall time ...
    assert gate.poll() is not None and out == []  # ... not in the audio heard
    gate.speech_resumed()  # the streamer reaches the words after the pause
    clock.t, heard["t"] = 102.6, 102.0  # ... and, later, the short hold after them
    gate.final("pizza.", TurnClock(speech_end=101.6))
    assert [p.text for p in out] == ["I'd like to order a pizza."]
    heard["t"] = 100.3  # a second conversation, the streamer as far behind
    lone = TurnGate(out.append, detector, clock, heard=lambda: heard["t"])
    lone.final("Tell me about the", TurnClock(speech_end=99.8))
    assert lone.poll() is not None
    heard["t"] = 99.8 + detector.hold_ms("Tell me about the") / 1000 + 0.01  # the hold passes in the audio
    lone.poll()
    assert out[-1].text == "Tell me about the" and out[-1].clock.endpoint == clock.t  # stamped in wall time
