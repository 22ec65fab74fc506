"""Pure parts of the chat loop: heard-text truncation, echo filter, turn log, virtual speaker, input specs."""
from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from voxcli.audio.virtual import VirtualSpeaker
from voxcli.config import turn_log_path
from voxcli.chat.heard import Span, heard_text, non_echo_words
from voxcli.bench.ledger import TERMS
from voxcli.chat.scripted_mic import ScriptedInput
from voxcli.chat.turnlog import TurnClock, append_turn, make_record, read_turns
from voxcli.errors import UsageError


def test_heard_text_whole_sentences_then_a_word_share():
    spans = [Span(0, 100, "One two three.", True), Span(100, 100, "Four five six seven.", True)]
    assert heard_text(spans, 0, 100) == ""
    assert heard_text(spans, 99, 100) == "One two"
    assert heard_text(spans, 150, 100) == "One two three. Four five"
    assert heard_text(spans, 10_000, 100) == "One two three. Four five six seven."


def test_heard_text_estimates_an_unfinished_sentence_from_the_speaking_rate():
    # 14 chars took 100 samples; the open sentence has 2x the text but only 50 samples written so far.
    spans = [Span(0, 100, "Aaaa bbbb ccc.", True), Span(100, 50, "Dddd eeee fff gggg hhhh iii.")]
    assert heard_text(spans, 200, 100) == "Aaaa bbbb ccc. Dddd eeee fff"  # half of ~200 samples: 3 of 6 words


def test_echo_words_do_not_count():
    recent = ["the", "capital", "of", "france", "is", "paris"]
    assert non_echo_words("Capital of France", recent) == []
    assert non_echo_words("paris, wait stop", recent) == ["wait", "stop"]


def test_turn_log_record_terms_match_the_ledger_and_round_trip():
    c = TurnClock(speech_end=10.0, endpoint=10.5, asr_final=10.62, llm_request=10.621, llm_first_token=10.9,
                  first_audio=11.05)
    rec = make_record(3, c, user="hi", assistant="hello", interrupted=False, cut_off=False, llm="m @ u",
                      llm_metrics={"ttft_s": 0.279})
    assert rec.first_audio_ms == pytest.approx(1050.0) and rec.speech_end_ms == 0.0
    assert rec.terms["llm_ttft_ms"] == pytest.approx(279.0)
    assert rec.terms["tts_first_audio_ms"] == pytest.approx(150.0)
    assert set(rec.terms) - {"total_ms"} <= set(TERMS)
    path = append_turn(rec)
    assert path == turn_log_path()
    with open(path, "a") as f:
        f.write('{"torn": \n')
    append_turn(rec)
    got = read_turns()
    assert len(got) == 2 and got[0]["event"] == "turn" and got[0]["version"] == 1
    assert json.loads(json.dumps(got[0]))["terms"]["endpoint_ms"] == pytest.approx(500.0)
    assert read_turns(last=1) == got[-1:]


def test_turn_log_without_speech_end_uses_the_asr_final_as_origin():
    rec = make_record(0, TurnClock(asr_final=5.0, llm_request=5.01), user="a", assistant="", interrupted=True,
                      cut_off=False, llm="x")
    assert rec.speech_end_ms is None and rec.asr_final_ms == 0.0 and rec.first_audio_ms is None
    assert "total_ms" not in rec.terms


def test_virtual_speaker_plays_in_real_time_and_stop_keeps_only_what_was_heard():
    sp = VirtualSpeaker(1000, max_ahead_s=0.2)
    t0 = time.perf_counter()
    starts = [sp.write(np.ones(100, np.float32)) for _ in range(4)]
    assert starts == [0, 100, 200, 300]
    assert time.perf_counter() - t0 >= 0.09  # the 4th write waited for room in the queue
    time.sleep(0.05)
    played = sp.stop()
    assert played >= 130  # >= 100 heard when the 4th write was let in, + the 50 ms sleep (a stalled machine: more)
    assert sp.timeline().size == played
    assert not sp.is_playing()
    assert sp.write(np.ones(10, np.float32)) == played  # the play head continues after a stop


def test_virtual_speaker_stop_wakes_a_blocked_writer():
    looks = []  # the clock reads of the writer thread: it is in the wait loop once it has read it twice
    th = None

    def clock():
        if threading.current_thread() is th:
            looks.append(1)
        return 0.0  # time stands still: the queue never makes room by itself

    sp = VirtualSpeaker(1000, max_ahead_s=0.1, clock=clock)
    sp.write(np.ones(5000, np.float32))
    result: list = []
    th = threading.Thread(target=lambda: result.append(sp.write(np.ones(10, np.float32))), daemon=True)
    th.start()
    deadline = time.monotonic() + 60
    while len(looks) < 2:  # blocked for sure (a stop before it began waiting would let it in)
        assert time.monotonic() < deadline, "the writer never blocked"
        time.sleep(0.01)
    sp.stop()
    th.join(60)
    assert not th.is_alive() and result == [None]


def test_virtual_speaker_timeline_keeps_gaps():
    now = [0.0]
    sp = VirtualSpeaker(1000, max_ahead_s=1.0, clock=lambda: now[0])
    sp.write(np.ones(50, np.float32))
    now[0] = 0.15  # the writer is late: 100 ms of silence after the first 50 ms
    sp.write(np.ones(50, np.float32))
    now[0] = 10.0
    assert sp.drain(1.0)
    tl = sp.timeline()
    assert tl.size == 200 and not tl[50:150].any() and tl[:50].all() and tl[150:].all()
    assert sp.underrun_s == pytest.approx(0.1)


def test_input_specs():
    assert ScriptedInput.parse("a.wav").offset_s is None
    s = ScriptedInput.parse("dir/b.wav@1.5")
    assert str(s.path) == "dir/b.wav" and s.offset_s == 1.5
    assert ScriptedInput.parse("x@y.wav").offset_s is None
    with pytest.raises(UsageError):
        ScriptedInput.parse("a.wav@-1")


def test_virtual_speaker_sink_gets_exactly_the_timeline_and_forgets_what_played():
    """chat -o writes replies as they are heard: the sink's stream equals timeline(), and memory stays bounded."""
    def run(sink):  # 1024 Hz and 1/8 s steps: every time below is exact in binary
        now = [0.0]
        sp = VirtualSpeaker(1024, max_ahead_s=0.5, sink=sink, clock=lambda: now[0])
        sp.write(np.ones(128, np.float32))
        sp.write(np.full(128, 2, np.float32))
        now[0] = 0.5  # a silence of 0.25 s between replies
        sp.write(np.full(128, 3, np.float32))
        sp.write(np.full(384, 4, np.float32))
        now[0] = 0.625
        played = sp.stop()  # barge-in: 3 heard, all of 4 unheard
        sp.write(np.full(64, 5, np.float32))
        now[0] = 1.0
        assert sp.drain(1.0)
        return sp, played

    out: list[np.ndarray] = []
    sp, played = run(out.append)
    sp.flush()
    streamed = np.concatenate(out)
    assert sp._segments == []  # everything played was handed over and forgotten
    assert played == 384 and sp.played_samples() == played + 64
    ref, _ = run(None)
    whole = ref.timeline()
    assert np.array_equal(streamed, whole)  # the same clock: the same samples at the same places
    want = np.concatenate([np.full(128, v, np.float32) for v in (1, 2, 0, 0, 3)] + [np.full(64, 5, np.float32)])
    assert np.array_equal(whole, want)
