"""`ASRStreamer.patch`: audio sent earlier and corrected since (chat: the user's first word, which the
echo canceller lost under the reply, rebuilt from the raw microphone; `voxcli.audio.echo_mask`).

The patch waits in the inbox in order with the samples, so the worker always holds the audio it
patches; the worker replaces it (or takes back what it dropped between utterances, never a
committed utterance's), and the utterance the VAD starts soon after begins at the patch.
"""
from __future__ import annotations

import threading

import numpy as np

from tests.asr.chat_streamer import chat_streamer
from voxcli.asr.buffer import PATCH_JOIN_S, PATCH_WAIT_S, WorkerBuffer
from voxcli.asr.endpointer import VADConfig
from voxcli.asr.inbox import AudioInbox, Patch
from voxcli.asr.streamer import ASRStreamer
from voxcli.audio.files import read_audio
from voxcli.runtimes.silero_vad import SileroVAD

SR = 16000
LATE_S = 1.6
"""A patch this much audio after its span: the worker decoded twice meanwhile (steps of 0.5 s), and "Best of"
turned stable."""


def _words(text: str) -> list[str]:
    return [w.strip(".,!?;:").lower() for w in text.split()]


def _transcribe(moonshine, vad_path, audio: np.ndarray, patch: tuple[int, np.ndarray] | None = None,
                after: int = 0, announce: int | None = None) -> str:
    """Chat's streamer settings, lockstep; `patch` is sent once the samples up to `after` were (announced
    with `expect_patch` once those up to `announce` were)."""
    s = ASRStreamer(moonshine, SileroVAD.load(vad_path), hold_from="speech", tail_from_speech=True, lockstep=True)
    threading.Thread(target=lambda: list(s.captions), daemon=True).start()
    sent = announced = False
    for i in range(0, audio.size, 512):
        s.send(audio[i : i + 512])
        if announce is not None and not announced and i + 512 >= announce:
            s.expect_patch()
            announced = True
        if patch is not None and not sent and i + 512 >= after:
            s.patch(*patch)
            sent = True
    return s.finish(timeout=300)


def test_a_first_word_patched_back_is_heard(moonshine, vad_path, speech_samples) -> None:
    audio = read_audio(speech_samples["two_cities"], rate=SR)[0][: 5 * SR]
    rms = np.sqrt(np.mean(audio[: audio.size // 160 * 160].reshape(-1, 160) ** 2, axis=1))
    onset = int(np.argmax(rms > 0.02)) * 160  # "It was the best of times, ..." starts here
    lo, hi = onset - 160 * 5, onset + int(0.45 * SR)
    covered = audio.copy()
    covered[lo:hi] = 0.0  # what AEC3 gave while the user started under a loud reply: nothing
    lost = _words(_transcribe(moonshine, vad_path, covered))
    assert lost[:2] != ["it", "was"], lost  # the test's premise: the covered words are gone
    start = lo - int(0.3 * SR)  # the patch reaches before the kept pre-roll, and after the covered span
    patched = _words(_transcribe(moonshine, vad_path, covered, (start, audio[start : hi + 3200]), after=hi + 3200))
    assert patched[:4] == ["it", "was", "the", "best"], patched


def test_an_announced_patch_is_waited_for_so_the_words_it_replaces_never_turn_stable(
        moonshine, vad_path, speech_samples) -> None:
    """Chat announces the patch at the onset and sends it once the span is rebuilt, later under load (the
    room's fit: 100-300 ms on the capture thread live). Words decoded meanwhile from the audio as first sent
    turned stable, and an utterance with stable words does not move back to the patch: its first words
    were lost. (Lockstep counts time in audio: the rebuild's delay is audio sent before the patch.)"""
    audio = read_audio(speech_samples["two_cities"], rate=SR)[0][: 6 * SR]
    rms = np.sqrt(np.mean(audio[: audio.size // 160 * 160].reshape(-1, 160) ** 2, axis=1))
    onset = int(np.argmax(rms > 0.02)) * 160
    lo, hi = onset - 160 * 5, onset + int(0.45 * SR)
    covered = audio.copy()
    covered[lo:hi] = 0.0  # "It was" lost under the reply; "the best of times" heard once it paused
    start = lo - int(0.3 * SR)
    patch = (start, audio[start : hi + 3200])
    late = hi + int(LATE_S * SR)
    unannounced = _words(_transcribe(moonshine, vad_path, covered, patch, after=late))
    assert unannounced[:2] != ["it", "was"], unannounced  # the premise: "the best" turned stable first
    announced = _words(_transcribe(moonshine, vad_path, covered, patch, after=late,
                                   announce=late - int(0.9 * PATCH_WAIT_S * SR)))  # within its wait
    assert announced[:4] == ["it", "was", "the", "best"], announced


def test_an_announced_patch_that_never_comes_is_waited_for_a_while_only() -> None:
    b = WorkerBuffer()
    b.append(np.zeros(SR, np.float32))
    b.announce()
    assert b.patch_due
    b.append(np.zeros(int(PATCH_WAIT_S * SR) - 1, np.float32))
    assert b.patch_due
    b.append(np.zeros(1, np.float32))
    assert not b.patch_due  # decoding resumes: the caller gave up on it (the ASR dropped audio meanwhile)
    b.announce()
    b.patch(SR // 2, np.ones(100, np.float32))
    assert not b.patch_due  # it came
    b.announce()
    b.patch(0, np.zeros(0, np.float32))
    assert not b.patch_due  # none will (chat: the ASR dropped audio since): an empty patch ends the wait


def test_a_patch_comes_after_the_samples_sent_before_it() -> None:
    box = AudioInbox(100)
    ok = lambda: True  # noqa: E731
    box.put(np.arange(10, dtype=np.float32), block=True, alive=ok)
    box.put_patch(Patch(2, np.zeros(3, np.float32)))
    box.put(np.arange(10, 20, dtype=np.float32), block=True, alive=ok)
    first, _ = box.take(16, whole=True)  # lockstep: the step stops short of the patch instead of waiting
    assert isinstance(first, np.ndarray) and first.tolist() == list(range(10))
    patch, pending = box.take(16, whole=True)
    assert isinstance(patch, Patch) and patch.sample == 2 and pending == 10
    box.close()  # (else lockstep waits for a whole step)
    rest, _ = box.take(16, whole=True)
    assert isinstance(rest, np.ndarray) and rest.tolist() == list(range(10, 20))


def test_drop_behind_keeps_a_patch_of_taken_audio_and_drops_one_behind_dropped_audio() -> None:
    box = AudioInbox(10)
    ok = lambda: True  # noqa: E731
    box.put_patch(Patch(0, np.zeros(2, np.float32)))  # of samples the worker already took
    box.put(np.arange(8, dtype=np.float32), block=False, alive=ok)
    box.put_patch(Patch(3, np.zeros(2, np.float32)))  # of samples that are about to be dropped
    assert box.put(np.arange(8, 12, dtype=np.float32), block=False, alive=ok) == 2
    got = [box.take(16)[0] for _ in range(2)]
    assert isinstance(got[0], Patch) and got[0].sample == 0
    assert isinstance(got[1], np.ndarray) and got[1].tolist() == list(range(2, 12))


def test_a_patch_takes_back_dropped_audio_but_never_a_committed_utterance() -> None:
    b = WorkerBuffer()
    b.append(np.zeros(4000, np.float32))
    b.commit(1000, 0)  # an utterance ended at 1000
    b.drop_before(3000, 0)  # between utterances only the pre-roll is kept
    span = b.patch(500, np.ones(3000, np.float32))  # [500, 3500): 500..1000 is the committed utterance's
    assert span == (1000, 3500) and b.start == 1000 and b.end == 4000
    assert b.span(1000, 3500).min() == 1.0 and b.span(3500, 4000).max() == 0.0
    assert b.patch(4000, np.ones(10, np.float32)) is None  # not taken yet: nothing to patch
    b.drop_before(3900, 0)
    assert b.patch(1000, np.ones(100, np.float32)) is None  # would leave a hole before the kept audio


def test_a_patched_span_joins_only_an_utterance_that_starts_soon_after() -> None:
    vad, join = VADConfig(), int(PATCH_JOIN_S * SR)
    b = WorkerBuffer()
    b.append(np.zeros(SR, np.float32))
    b.patch(8000, np.ones(4000, np.float32))
    late = 12000 + join + 512  # its first speech frame comes later than `join` after the span
    assert b.utterance_start(late - 3200, late) == late - 3200 and b.patched.span is None
    b.patched.span = (8000, 12000)
    assert b.utterance_start(11000, 12500) == 8000  # its first speech frame soon after: it begins at the patch
    b.patched.span = (8000, 12000)
    b.append(np.zeros(2 * SR, np.float32))
    b.trim_idle(vad, None, 0)  # no utterance started in time: the span was not speech after all
    assert b.patched.span is None and b.start == b.end - vad.pad_samples - 512


def test_a_patch_after_finish_or_cancel_is_ignored(moonshine, vad_path, speech_samples) -> None:
    """The final is decided at `finish()` (send raises then); a late patch from chat's mask, whose
    input may end right after a pause, must neither raise nor change it."""
    audio = read_audio(speech_samples["beckett"], rate=SR)[0][: 4 * SR]
    s = ASRStreamer(moonshine, SileroVAD.load(vad_path), hold_from="speech", tail_from_speech=True, lockstep=True)
    threading.Thread(target=lambda: list(s.captions), daemon=True).start()
    s.send(audio)
    final = s.finish(timeout=300)
    assert final.strip()
    s.patch(0, np.zeros(SR, np.float32))  # no error, and nothing left queued behind the exited worker
    assert not [p for p in s._inbox._parts if isinstance(p, Patch)]
    c = ASRStreamer(moonshine, SileroVAD.load(vad_path), lockstep=True)
    c.cancel()
    c.patch(0, audio[:SR])
    assert not [p for p in c._inbox._parts if isinstance(p, Patch)]


def _short_command(moonshine, vad_path, audio: np.ndarray, patch: tuple[int, np.ndarray], announce: int | None
                   ) -> tuple[str, int]:
    """Chat's streamer settings, lockstep, fed at the worker's pace; `patch` sent once the endpoint was seen
    (announced once the samples up to `announce` were). Returns (transcript, samples sent when it was seen)."""
    s, ended = chat_streamer(moonshine, vad_path, "end")
    seen = None
    for i in range(0, audio.size, 512):
        s.send(audio[i : i + 512])
        if announce is not None and i < announce <= i + 512:
            s.expect_patch()
        while s.pending_s * SR >= s.step:  # the worker keeps up (lockstep takes whole steps): the endpoint
            ended.wait(0.005)  # is seen within a step of the audio it came at
        if seen is None and ended.wait(0.05):
            seen = i + 512
            s.patch(*patch)
    return s.finish(timeout=300), seen or -1


def test_an_endpoint_before_its_announced_patch_waits_for_it(moonshine, vad_path, speech_samples) -> None:
    """A short command said over the reply ("Try again.", 0.7 s) ends before its first word's patch lands:
    the endpoint's final decode waits for the announced patch, else it commits the audio the patch replaces
    (and a committed utterance takes no patch). ("No matter." is no good here: moonshine-tiny hears "No
    matter, no matter." in one of its spans, patched or not.)"""
    audio = read_audio(speech_samples["beckett"], rate=SR)[0][int(4.4 * SR) : int(5.8 * SR)]
    audio = np.concatenate([audio, np.zeros(int(2.5 * SR), np.float32)])
    rms = np.sqrt(np.mean(audio[: audio.size // 160 * 160].reshape(-1, 160) ** 2, axis=1))
    onset = int(np.argmax(rms > 0.02)) * 160  # "Try again." (then silence)
    lo, hi = onset - 160 * 5, onset + int(0.25 * SR)
    covered = audio.copy()
    covered[lo:hi] = 0.0  # "Try" lost under the reply
    start = lo - int(0.3 * SR)
    patch = (start, audio[start : hi + 3200])
    unannounced, seen = _short_command(moonshine, vad_path, covered, patch, None)
    assert _words(unannounced) != ["try", "again"], unannounced  # the premise: the final came first
    announced, seen = _short_command(moonshine, vad_path, covered, patch, hi)
    assert hi < seen < hi + int(PATCH_WAIT_S * SR)  # the endpoint came before the patch, within its wait
    assert _words(announced) == ["try", "again"], announced


def test_a_patch_past_a_waiting_final_is_kept_for_the_next_utterance(moonshine, vad_path) -> None:
    """An utterance ended (its final waits for the announced patch) and the patch lands after its end: it is
    the next utterance's first word (a barge-in right after a short "Okay."), so the ended one does not take
    it; a patch reaching into the ended utterance is that one's ("Try again." said over the reply)."""
    for lo, taken in ((3 * SR, False), (int(0.8 * SR), True)):
        s = ASRStreamer(moonshine, SileroVAD.load(vad_path), hold_from="speech", tail_from_speech=True)
        s._b.append(np.zeros(4 * SR, np.float32))  # the worker waits for input: the test sets its state
        s._utt_start, s._final_due = SR, int(1.5 * SR)
        s._patch(Patch(lo, np.full(SR // 2, 0.1, np.float32)))
        assert s._b.patched.span is None if taken else s._b.patched.span == (lo, lo + SR // 2)
        assert s._utt_start == (lo if taken else SR)  # taken: the utterance starts at its first word
        s.cancel()
