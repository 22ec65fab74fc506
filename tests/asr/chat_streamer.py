"""Chat's streamer for the patch tests: its settings, lockstep, its captions drained, an edge watched; the
recorded model, the clip with its first word covered, and a run that patches it back (test_patch_lead,
test_patch_commit)."""
from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from voxcli.asr.streamer import ASRStreamer
from voxcli.audio.files import read_audio
from voxcli.runtimes.silero_vad import SileroVAD


def chat_streamer(model: Any, vad_path: Any, edge: str, captions: list | None = None,
                  final_model: Any = None) -> tuple[ASRStreamer, threading.Event]:
    """A streamer as chat makes it (hold from the speech), lockstep (deterministic), whose captions a thread
    drains (into `captions` when given, then None once they ended); the event is set at the first `edge` ("start"
    or "end") of an utterance."""
    s = ASRStreamer(model, SileroVAD.load(vad_path), hold_from="speech", tail_from_speech=True, lockstep=True,
                    final_model=final_model)
    seen = threading.Event()
    s.subscribe(lambda ev: seen.set() if getattr(ev, "kind", None) == edge else None)
    def drain() -> None:
        for c in s.captions:
            if captions is not None:
                captions.append(c)
        if captions is not None:
            captions.append(None)

    threading.Thread(target=drain, daemon=True).start()
    return s, seen


SR = 16000


def ended(captions: list) -> list:
    """`captions` (given to `chat_streamer`) once its drain took the last one (`finish` has returned: soon)."""
    deadline = time.monotonic() + 30
    while not (captions and captions[-1] is None):
        assert time.monotonic() < deadline, "the captions did not end"
        time.sleep(0.01)
    return captions[:-1]


class Recorded:
    """The real model, keeping the audio, prompt and words of every decode."""

    def __init__(self, model: Any) -> None:
        self._model, self.calls, self.prompts, self.words = model, [], [], []
        self.before_patch = -1  # decodes made before the patch was sent (an utterance running already)

    def transcribe(self, audio: np.ndarray, prompt: str | None = None, **kw: Any) -> Any:
        self.calls.append(np.array(audio))
        self.prompts.append(prompt)
        self.words.append(words := self._model.transcribe(audio, prompt, **kw))
        return words

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def run_patched(model: Recorded, vad_path, audio: np.ndarray, patch: tuple[int, np.ndarray] | None, after: int,
         on_start: bool = False, captions: list | None = None, final_model: Any = None) -> str:
    """Chat's streamer settings, lockstep; `patch` sent once the samples up to `after` were (`on_start`: once
    the VAD started the utterance, the worker kept up with what was sent); its captions into `captions`."""
    s, started = chat_streamer(model, vad_path, "start", captions, final_model)
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


def covered_clip(speech_samples: Any) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Two Cities' first 5 s, and the same with the user's first word zeroed over [lo, hi)."""
    audio = read_audio(speech_samples["two_cities"], rate=SR)[0][: 5 * SR]
    rms = np.sqrt(np.mean(audio[: audio.size // 160 * 160].reshape(-1, 160) ** 2, axis=1))
    onset = int(np.argmax(rms > 0.02)) * 160  # "It was the best of times, ..." starts here
    lo, hi = onset - 160 * 5, onset + int(0.45 * SR)
    covered = audio.copy()
    covered[lo:hi] = 0.0  # what AEC3 gave while the user started under a loud reply
    return audio, covered, lo, hi
