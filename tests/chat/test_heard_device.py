"""What the user heard of a cut-off reply comes from the device's play position, not a clock estimate.

The samples handed to PortAudio reach the listener an output latency later
(`voxcli.audio.aec_ref.PlayHead`, fed with the output callbacks' DAC stamps),
and silence padded by an underrun plays no word. Offline: the output callbacks
scripted with their stamps, on the real voice's word times. On the null sink:
a barge-in flushes the one output stream (no new stream), the writes of the
cut-off reply that were under way are dropped, the next reply plays on, and the
history keeps no word the device had not been handed (what it had still plays out,
so `stop()` counts it as heard: `Player.flush`). A pause that nothing ends expires.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from tests.tts.test_words import voice  # noqa: F401 - the fixture
from voxcli.audio.aec_ref import PlayHead
from voxcli.chat.heard import Span, heard_text, place
from voxcli.tts.streamer import TTSStreamer, Voice

REPLY = "Sure. It costs $3.50 at the station, and the train leaves at 8:15 every morning."
LATENCY_S = 0.12
BLOCK = 256


def _chunks(voice: Voice) -> list:
    s = TTSStreamer(voice)
    s.send(REPLY)
    s.finish()
    return [c for c in s.output if c.kind == "audio" and not c.is_final]


def _placed(chunks: list) -> tuple[list[Span], list]:
    spans: list[Span] = []
    at = 0
    for c in chunks:
        place(spans, c, at, c.sample_rate)
        at += c.audio.size
    return spans, [w for s in spans for w in s.words]


def test_play_head_follows_the_dac_stamps_and_skips_underruns() -> None:
    head = PlayHead(1000)
    assert head.heard(5.0) == 0
    head.record(0, 10.0, 100)  # samples 0..100 heard from t=10.0 (handed at 9.9, 100 ms latency)
    head.record(100, 10.1, 40)  # an underrun: 40 samples, then silence
    head.record(140, 10.5, 100)  # audio again after the gap
    assert [head.heard(t) for t in (9.95, 10.0, 10.05, 10.1, 10.13, 10.3, 10.5, 10.55, 11.0)] == [
        0, 0, 50, 100, 130, 140, 140, 190, 240]
    head.record(240, 11.0, 0)  # silence: not a block of audio
    assert head.heard(12.0) == 240


def test_history_keeps_the_words_the_device_had_played_not_those_handed_to_it(voice: Voice) -> None:
    chunks = _chunks(voice)
    rate = chunks[0].sample_rate
    spans, words = _placed(chunks)
    assert len(words) >= 10
    head = PlayHead(rate, keep=100_000)  # asked about the past below: keep every callback
    handed = 0
    t_cb = 100.0  # the output callbacks, every BLOCK samples, each heard LATENCY_S after it runs
    total = sum(c.audio.size for c in chunks)
    while handed < total:
        n = min(BLOCK, total - handed)
        head.record(handed, t_cb + LATENCY_S, n)
        handed += n
        t_cb += BLOCK / rate
    for k, w in enumerate(words):
        j = (w.end - 1) // BLOCK  # the callback that hands the word's last sample, at t_hand
        t_hand = 100.0 + j * BLOCK / rate
        # the text up to this word, for a word that ends new written text ("three" of "$3.50", not "dollars")
        new_text = w.char_end is not None and (k == 0 or (words[k - 1].char_end or 0) < w.char_end)
        said = REPLY[:w.char_end].strip() if new_text else None
        # handed to the device, not heard yet: the clock estimate (handed = heard) kept this word
        assert head.heard(t_hand) < w.end
        if said is not None:
            assert len(heard_text(spans, head.heard(t_hand), rate, written=REPLY)) < len(said)
        later = head.heard(t_hand + LATENCY_S + BLOCK / rate + 1e-6)  # one block after it reached the DAC
        assert later >= w.end
        if said is not None:
            assert heard_text(spans, later, rate, written=REPLY).startswith(said)


@pytest.mark.device
@pytest.mark.flaky(reruns=2, reason="real-time play through PulseAudio on a shared CPU")
def test_a_barge_in_flushes_the_one_stream_and_keeps_only_words_the_device_played(voice: Voice, null_sink) -> None:
    import threading

    from voxcli.audio.virtual import DeviceSpeaker

    chunks = _chunks(voice)
    rate = chunks[0].sample_rate
    spans: list[Span] = []
    lock = threading.Lock()
    dropped: list[int] = []

    def speak() -> None:  # as the agent's play thread: write, place the words where the write went
        for again in range(20):  # the reply, then more of it: a write is still waiting when stop() comes,
            for c in chunks:     # however long this thread was starved (only the first round is placed)
                at = speaker.write(c.audio)
                if at is None:
                    dropped.append(1)
                    return
                if not again:
                    with lock:
                        place(spans, c, at, rate)

    speaker = DeviceSpeaker(rate, "pulse")
    try:
        player = speaker._player
        writer = threading.Thread(target=speak, daemon=True)
        writer.start()
        words_total = sum(len(c.words) for c in chunks)
        deadline = time.monotonic() + 60
        while speaker.played_samples() < rate // 2:  # half a second of the reply has reached the "listener"
            assert time.monotonic() < deadline, "the null sink played nothing"
            time.sleep(0.02)
        speaker.pause(600)  # a speech run: the callbacks from now on hand silence, the queue waits
        paused_at = player.played_samples
        t_pause = time.monotonic()
        while time.monotonic() - t_pause < 0.3:  # callbacks keep running meanwhile
            time.sleep(0.02)
        assert player.played_samples == paused_at and player.buffered_s > 0
        speaker.resume()
        while speaker.played_samples() < rate:  # it plays on, from where it paused
            assert time.monotonic() < deadline, "the reply did not resume"
            time.sleep(0.02)
        played = speaker.stop()
        handed = player.played_samples
        writer.join(30)
        assert not writer.is_alive() and dropped, "the write under way was not dropped"
        assert speaker._player is player  # the same stream: nothing to open on a barge-in
        with lock:
            heard_words = [w for s in spans for w in s.words if w.end <= played]
            kept = heard_text(spans, played, rate, written=REPLY)
        assert rate <= played <= handed * rate / player.device_rate + 1  # what was handed will have been heard
        assert 0 < len(heard_words) < words_total and REPLY.startswith(kept) and kept
        # the next reply plays on the same stream, placed after what the device already had
        at = speaker.write(chunks[0].audio)
        assert at is not None and at >= played
        while speaker.played_samples() < at + chunks[0].audio.size // 2:
            assert time.monotonic() < deadline + 60, "the next reply did not play"
            time.sleep(0.02)
    finally:
        speaker.close()


@pytest.mark.device
def test_a_resampling_player_plays_again_after_a_drain(null_sink) -> None:
    """chat drains the speaker after every reply; with a device at another rate the resampler's stream
    was flushed for good there ("Input after last input" on the next reply's first write)."""
    from voxcli.audio.player import Player
    from voxcli.audio.pcm import StreamResampler

    with Player(16000, "pulse") as player:
        player._resampler = StreamResampler(16000, 22050)  # as on a device that refuses 16 kHz
        tone = (0.1 * np.sin(np.arange(1600) / 5.0)).astype(np.float32)
        assert player.write(tone, timeout=10) == 0
        assert player.drain(timeout=30)
        assert player.write(tone, timeout=10) == 1600  # the next reply: accepted, placed after the first
        assert player.drain(timeout=30)


@pytest.mark.device
def test_a_pause_nothing_ends_expires_and_a_write_from_before_a_flush_is_dropped(null_sink) -> None:
    """No VAD batch may come to end a pause (the input ended, a stuck ASR worker): the device plays on
    by itself, so `write` and `drain` cannot wait on it for good. And a write that carries the epoch of
    before a barge-in's flush does not play the cut-off reply."""
    from voxcli.audio.player import Player
    from voxcli.audio.virtual import DeviceSpeaker

    tone = (0.1 * np.sin(np.arange(8000) / 5.0)).astype(np.float32)
    with Player(16000, "pulse") as player:
        player.pause(0.2)
        assert player.write(tone, timeout=30) == 0
        assert player.drain(timeout=120)  # no resume(): the pause ran out and the queue played
        assert player.played_samples >= tone.size
        epoch = player.epoch
        player.flush()
        assert player.write(tone, timeout=30, epoch=epoch) is None
        assert player.buffered_s == 0
    speaker = DeviceSpeaker(16000, "pulse")
    try:
        epoch = speaker.epoch
        speaker.stop()
        assert speaker.write(tone, epoch=epoch) is None
        assert speaker.write(tone, epoch=speaker.epoch) is not None
        assert not speaker.can_pause()  # no echo canceller: its own echo would pause it
    finally:
        speaker.close()
    speaker = DeviceSpeaker(16000, "pulse", on_played=lambda out, t, rate: None)  # the canceller's tap
    try:
        assert not speaker.can_pause()  # the canceller has heard nothing of the reply yet
        reply = np.tile(tone, int(DeviceSpeaker.ECHO_WARMUP_S * 16000 / tone.size) + 2)
        assert speaker.write(reply) is not None
        assert speaker.drain(120)
        assert speaker.can_pause()
    finally:
        speaker.close()
