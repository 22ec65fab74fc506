"""An utterance that begins at a patched span is decoded after `PATCH_LEAD_S` of silence.

Chat's rebuilt first word starts 0.3 s before a barge-in's onset, and between utterances the streamer keeps
nothing before it: decoded from its first sample, the patched audio came out "It was best of times" where a
one-shot decode of the same audio heard "It was the best of times" (benchmarks/replay_barge_in.py). The
decoder now gets the silence a VAD-started utterance has before its first word; nothing else changes.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tests.asr.chat_streamer import chat_streamer
from voxcli.asr.buffer import PATCH_LEAD_S
from voxcli.audio.files import read_audio

SR = 16000
LEAD = int(PATCH_LEAD_S * SR)


class Recorded:
    """The real model, keeping the audio of every decode."""

    def __init__(self, model: Any) -> None:
        self._model, self.calls = model, []
        self.before_patch = -1  # decodes made before the patch was sent (an utterance running already)

    def transcribe(self, audio: np.ndarray, prompt: str | None = None, **kw: Any) -> Any:
        self.calls.append(np.array(audio))
        return self._model.transcribe(audio, prompt, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def _run(model: Recorded, vad_path, audio: np.ndarray, patch: tuple[int, np.ndarray] | None, after: int,
         on_start: bool = False, captions: list | None = None) -> str:
    """Chat's streamer settings, lockstep; `patch` sent once the samples up to `after` were (`on_start`: once
    the VAD started the utterance, the worker kept up with what was sent); its captions into `captions`."""
    s, started = chat_streamer(model, vad_path, "start", captions)
    sent = False
    for i in range(0, audio.size, 512):
        s.send(audio[i : i + 512])
        if on_start:
            while s.pending_s * SR >= s.step:  # lockstep takes whole steps: the start is seen within a step
                started.wait(0.005)
        if patch is not None and not sent and i + 512 >= after and (not on_start or started.wait(0.05)):
            model.before_patch = len(model.calls)
            s.patch(*patch)
            sent = True
    return s.finish(timeout=300)


def _covered(speech_samples: Any) -> tuple[np.ndarray, np.ndarray, int, int]:
    audio = read_audio(speech_samples["two_cities"], rate=SR)[0][: 5 * SR]
    rms = np.sqrt(np.mean(audio[: audio.size // 160 * 160].reshape(-1, 160) ** 2, axis=1))
    onset = int(np.argmax(rms > 0.02)) * 160  # "It was the best of times, ..." starts here
    lo, hi = onset - 160 * 5, onset + int(0.45 * SR)
    covered = audio.copy()
    covered[lo:hi] = 0.0  # what AEC3 gave while the user started under a loud reply
    return audio, covered, lo, hi


def _opened(model: Recorded, span: np.ndarray) -> list[np.ndarray]:
    """The decodes of the utterance that began at `span`: the lead-in's silence, then the span sample for sample;
    none may begin with the span itself (a decode without the lead-in)."""
    assert not any(a.size >= LEAD and np.array_equal(a[:LEAD], span[:LEAD]) for a in model.calls)
    opened = [a for a in model.calls if a.size > LEAD + span.size // 2 and not np.any(a[:LEAD])]
    for a in opened:
        np.testing.assert_array_equal(a[LEAD : LEAD + span.size], np.clip(span, -1, 1)[: a.size - LEAD])
    return opened


def test_a_patched_utterance_is_decoded_after_the_lead_in_and_a_plain_one_is_not(
        moonshine, vad_path, speech_samples) -> None:
    """The patch lands before the VAD starts the utterance: the utterance joins it (`_ingest`)."""
    audio, covered, lo, hi = _covered(speech_samples)
    start = lo - int(0.3 * SR)  # chat's span: 0.3 s before the onset, rebuilt up to after the pause
    span = audio[start : hi + 3200]
    patched = Recorded(moonshine)
    text = _run(patched, vad_path, covered, (start, span), after=hi + 3200)
    assert patched.before_patch == 0 and text.lower().startswith("it was"), text
    assert len(_opened(patched, span)) >= 2  # the re-decodes and the final
    plain = Recorded(moonshine)
    _run(plain, vad_path, audio, None, after=0)
    assert plain.calls and not any(a.size > LEAD and not np.any(a[:LEAD]) for a in plain.calls)


def test_a_running_utterance_that_moves_back_to_a_patch_gets_the_lead_in(moonshine, vad_path, speech_samples) -> None:
    """The patch lands after the VAD started the utterance (none of its words stable yet): the utterance moves
    back to the patch (`_patch`), and its decodes from then on get the lead-in."""
    audio, covered, lo, hi = _covered(speech_samples)
    start = lo - int(0.3 * SR)
    span = audio[start : hi + 3200]
    patched = Recorded(moonshine)
    _run(patched, vad_path, covered, (start, span), after=hi, on_start=True)
    assert patched.before_patch >= 0  # it was sent once the VAD had started the utterance
    assert len(_opened(patched, span)) >= 2
