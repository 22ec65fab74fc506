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
    assert 130 <= played <= 300
    assert sp.timeline().size == played
    assert not sp.is_playing()
    assert sp.write(np.ones(10, np.float32)) == played  # the play head continues after a stop


def test_virtual_speaker_stop_wakes_a_blocked_writer():
    sp = VirtualSpeaker(1000, max_ahead_s=0.1)
    sp.write(np.ones(5000, np.float32))
    result = []
    th = threading.Thread(target=lambda: result.append(sp.write(np.ones(10, np.float32))))
    th.start()
    time.sleep(0.1)
    sp.stop()
    th.join(1.0)
    assert not th.is_alive() and result == [None]


def test_virtual_speaker_timeline_keeps_gaps():
    sp = VirtualSpeaker(1000, max_ahead_s=1.0)
    sp.write(np.ones(50, np.float32))
    time.sleep(0.15)
    sp.write(np.ones(50, np.float32))
    sp.drain(1.0)
    tl = sp.timeline()
    assert 190 <= tl.size <= 240 and 0.0 in tl[60:140] and tl[-1] == 1.0
    assert sp.underrun_s >= 0.08


def test_input_specs():
    assert ScriptedInput.parse("a.wav").offset_s is None
    s = ScriptedInput.parse("dir/b.wav@1.5")
    assert str(s.path) == "dir/b.wav" and s.offset_s == 1.5
    assert ScriptedInput.parse("x@y.wav").offset_s is None
    with pytest.raises(UsageError):
        ScriptedInput.parse("a.wav@-1")


def test_virtual_speaker_sink_gets_exactly_the_timeline_and_forgets_what_played():
    """chat -o writes replies as they are heard: the sink's stream equals timeline(), and memory stays bounded."""
    def run(sink):
        sp = VirtualSpeaker(1000, max_ahead_s=0.2, sink=sink)
        sp.write(np.ones(100, np.float32))
        sp.write(np.full(100, 2, np.float32))
        time.sleep(0.35)  # a silence between replies
        sp.write(np.full(100, 3, np.float32))
        sp.write(np.full(300, 4, np.float32))
        time.sleep(0.1)
        played = sp.stop()  # barge-in: the rest of 3 and all of 4 unheard
        sp.write(np.full(50, 5, np.float32))
        sp.drain(1.0)
        return sp, played

    out: list[np.ndarray] = []
    sp, played = run(out.append)
    sp.flush()
    streamed = np.concatenate(out)
    assert sp._segments == []  # everything played was handed over and forgotten
    assert sp.played_samples() == played + 50
    ref, _ = run(None)
    whole = ref.timeline()
    # same content: the values heard, in order, with the silence between (timings differ by a few ms)
    for v in (1.0, 2.0, 5.0):
        assert (streamed == v).sum() == (whole == v).sum()
    assert 4.0 not in streamed and 0.0 in streamed[200:]
    assert abs(streamed.size - whole.size) <= 30
