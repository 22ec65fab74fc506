"""The audio the ASR worker keeps, in absolute stream samples, with the VAD score of each frame.

The worker decodes spans of it ([utterance start, now)), drops what no
utterance can need any more, and, when an utterance outgrows the bound,
looks for the quietest frame to cut at. A caller that has since corrected
audio it sent (chat: the first word an echo canceller suppressed) patches
it back (`patch`).
"""
from __future__ import annotations

from typing import Final

import numpy as np

from voxcli.asr.endpointer import FRAME, SAMPLE_RATE as SR, VADConfig
from voxcli.errors import UsageError

PATCH_JOIN_S: Final = 0.5
"""A patched span joins an utterance whose first speech frame comes this soon after it (`PatchedSpeech`)."""
PATCH_LEAD_S: Final = 0.5
"""Silence the decoder gets before an utterance that begins at a patched span (`ASRStreamer._decode`).

Why: an utterance the VAD starts begins `pad_ms` (200 ms) of audio before its first speech frame, most often
the quiet before the word; one that begins at a patched span (chat's rebuilt first word, `voxcli.chat.first_word`,
0.3 s before a barge-in's onset) was decoded from the span's first sample. Replayed through chat's streamer
(benchmarks/replay_barge_in.py), one session's 16 barge-ins came out "It was best of times", "It's a best of
times" (WER 0.089) where a one-shot decode of the same patched audio heard "the" (0.016). Over three sessions
(64): 0.060 before; 0.046 with 0.5 s (0.031, 0.045, 0.056 per session), 0.051 with 0.3 s (0.026, 0.062, 0.056:
two of three sessions a little worse); one-shot 0.033. A fourth session: 0.080 before, 0.111 with 0.5 s: over
the 88, 0.065 against 0.063, no gain shown (README: "The decode, not the audio"). Those early commits hid
it: with `PATCH_COMMIT_S` in place (lockstep, the 88, no drafts), 0.076 without the lead-in, 0.056 with 0.5 s.
Its length is noise past that: committing nothing before the final, 0.3/0.5/0.8/1.0/1.5/2.0 s gave
0.046/0.053/0.065/0.040/0.047/0.047 (a near-tie "the" flips); 0.5 s kept, not the best draw."""
PATCH_COMMIT_S: Final = 2.0
"""An utterance that begins at a patched span commits no stable word before it holds this much audio
(`LocalAgreement.show`): its decodes until then are shown, volatile, and do not count toward an agreement.

Why: two short decodes agreeing on a guessed first word locked it in. Replayed in lockstep
(`benchmarks/replay_barge_in.py --lockstep`) over 88 saved barge-ins, the 1.3 and 1.8 s decodes
both said "It was a best of times" and the ratchet kept "a" where the final, unforced, heard "the".
Over those 88: WER 0.062 committing at once (and with 1.0 s), 0.052 with 1.5 s, 0.054 with 2.0 and 3.0 s,
0.053 committing nothing before the final; one-shot 0.044. 2.0 s: past the knee, with a margin. Only the
caption's stable part waits: the barge-in and chat's warm-up read stable and volatile words alike."""
PATCH_WAIT_S: Final = 1.5
"""An announced patch is waited for (no re-decode) until this much more audio was taken, at most (`announce`):
chat's comes 0.24-0.84 s of audio after its announcement (its span after the pause, `echo_mask.TRAIL_S`), and
the fit's time later (50 ms of one core on a thread of its own, `voxcli.chat.first_word`; 0.1-0.2 s live)."""


def clean(chunk: np.ndarray) -> np.ndarray:
    """NaN/inf as silence (they would poison the VAD state and the encoder), clipped to [-1, 1]."""
    bad = ~np.isfinite(chunk)
    if bad.any():
        chunk = np.where(bad, 0.0, chunk).astype(np.float32)
    return np.clip(chunk, -1.0, 1.0)


class WorkerBuffer:
    """`audio` starts at absolute sample `start`; `probs[i]` scores frame `first_frame + i`."""

    def __init__(self, max_buffer_s: float = 20.0) -> None:
        self.max_span = int(max_buffer_s * SR)
        """Longest utterance kept before its head is cut (`ASRStreamer`'s bounded buffer)."""
        if self.max_span < 4 * SR:
            raise UsageError("max buffer must be at least 4 s")
        self.audio = np.zeros(0, dtype=np.float32)
        self.start = 0
        self.probs: list[float] = []  # VAD score per frame, frame k = samples [512k, 512k+512)
        self.floor = 0  # audio before this belongs to a committed utterance: no patch reaches it
        self.patched = PatchedSpeech(int(PATCH_JOIN_S * SR))
        self._due_until: int | None = None

    def announce(self) -> None:
        """A patch is on its way (`ASRStreamer.expect_patch`): no re-decode until it comes, or `PATCH_WAIT_S` more.

        Why: a decode of the audio as first sent can make its words stable, and stable words stay
        first: an utterance that has them does not move back to the patch (`PatchedSpeech`), and they
        are forced as the decoder's prefix. Chat's barge-in rebuild through a room takes 50 ms of one
        core, and on the capture thread it held the capture 100-300 ms live under load; in that time a decode
        of AEC3's output made "He was", "What what's" stable over "It was" (benchmarks/bench_barge_in.py --room 0.3)."""
        self._due_until = self.end + int(PATCH_WAIT_S * SR)

    @property
    def patch_due(self) -> bool:
        """An announced patch has not come, and its wait is not over."""
        if self._due_until is not None and self.end >= self._due_until:
            self._due_until = None
        return self._due_until is not None

    @property
    def end(self) -> int:
        """Absolute sample after the last one kept."""
        return self.start + self.audio.size

    def append(self, chunk: np.ndarray) -> np.ndarray:
        """Keep `chunk` (`clean`: as the VAD and the model may see it); returns it as kept."""
        chunk = clean(chunk)
        self.audio = np.concatenate([self.audio, chunk])
        return chunk

    def commit(self, end: int, frames_scored: int) -> None:
        """An utterance (or a cut's head) up to `end` is committed: forget it; no patch reaches it."""
        self.floor = max(self.floor, end)
        self.drop_before(end, frames_scored)

    def trim_idle(self, vad: VADConfig, candidate: int | None, frames_scored: int) -> None:
        """Between utterances keep only the pre-roll (`pad_ms`, plus a frame of slack), the audio of a
        not-yet-confirmed speech start (`candidate`; told `min_speech_ms` after it) and a patched span
        an utterance may still join."""
        keep = self.end - vad.pad_samples - FRAME - (0 if candidate is None else max(0, self.end - candidate))
        self.drop_before(self.patched.keep_from(keep, self.end, vad.frames(vad.min_speech_ms) * FRAME), frames_scored)

    def patch(self, sample: int, audio: np.ndarray) -> tuple[int, int] | None:
        """Replace [sample, sample + audio.size) with `audio` where it is kept, or was dropped after `floor`.

        What was dropped (between utterances only the pre-roll is kept) comes back from the patch
        when it joins the kept audio, so a patch can reach before the buffer's start, never before
        `floor` (audio of a committed utterance) nor past the end (not taken yet). Returns the
        span now patched (also `patched.span`), or None when nothing of it could be.
        """
        self._due_until = None  # what was announced came (or what could be of it)
        lo, hi = max(sample, self.floor), min(sample + audio.size, self.end)
        if hi <= lo or hi < self.start:
            return None
        a = clean(np.asarray(audio, np.float32)[lo - sample : hi - sample])
        if lo < self.start:
            self.audio = np.concatenate([a[: self.start - lo], self.audio])
            self.start = lo
        self.audio[lo - self.start : hi - self.start] = a
        self.patched.span = (lo, hi)
        return lo, hi

    def utterance_start(self, start: int, first_speech: int) -> int:
        """Where an utterance starts: at `start` (at the kept audio's start at the earliest), or earlier
        at a patched span it joins (`PatchedSpeech`)."""
        return self.patched.start(max(self.start, start), first_speech, max(self.floor, self.start))

    def span(self, start: int, end: int) -> np.ndarray:
        """The samples [start, end) (absolute)."""
        return self.audio[start - self.start : end - self.start]

    def drop_before(self, sample: int, frames_scored: int) -> None:
        """Forget audio before `sample` and the scores of frames wholly before the kept audio."""
        cut = min(max(0, sample - self.start), self.audio.size)
        if cut:
            self.audio = self.audio[cut:].copy()
            self.start += cut
        drop = self.start // FRAME - (frames_scored - len(self.probs))
        if drop > 0:
            del self.probs[:drop]

    def cut_point(self, start: int, stable: int, volatile: int, frames_scored: int) -> int:
        """Where to cut an utterance [start, end) that outgrew the bound: the quietest frame of its
        stable part (the share of `stable` words in the hypothesis, from 2 s in), or of its middle
        when little is stable."""
        stable_frac = stable / (stable + volatile) if stable + volatile else 0.0
        end = self.end
        span = end - start
        lo, hi = start + 2 * SR, start + int(span * stable_frac)
        if hi - lo < 2 * SR:  # little is stable: search the middle of the buffer instead
            lo, hi = start + span // 2, end - SR
        return self.quietest(lo, hi, frames_scored)

    def quietest(self, lo: int, hi: int, frames_scored: int) -> int:
        """Middle of the lowest-scoring frame (3-frame average) in [lo, hi); the latest on ties."""
        first = frames_scored - len(self.probs)
        k0, k1 = max(lo // FRAME, first + 1), min(hi // FRAME, frames_scored - 1)
        if k1 <= k0:
            return (lo + hi) // 2
        p = np.asarray(self.probs, dtype=np.float32)
        smooth = np.convolve(p, np.ones(3, dtype=np.float32) / 3, mode="same")
        window = smooth[k0 - first : k1 - first]
        k = k0 + (len(window) - 1 - int(np.argmin(window[::-1])))
        return k * FRAME + FRAME // 2


class PatchedSpeech:
    """A patched span joins the utterance that starts within `join` samples after it.

    Why: the patch is the caller's word that the span holds speech the VAD could not score (it
    scored the audio as first sent: chat's echo canceller had suppressed the user's first word).
    The utterance the VAD starts once the user shows then begins at the patch, not a pad before
    its own first speech frame, and the buffer keeps the span until then (`keep_from`).
    """

    def __init__(self, join: int) -> None:
        self.join = join
        self.span: tuple[int, int] | None = None

    def keep_from(self, sample: int, now: int, latest_start: int) -> int:
        """Where the buffer may be cut between utterances: not after a span an utterance may still join.

        `latest_start`: how far past its first speech frame an utterance's start is told (min speech)."""
        if self.span is not None and now > self.span[1] + self.join + latest_start:
            self.span = None  # no utterance started in time: the span was no speech after all
        return sample if self.span is None else min(sample, self.span[0])

    def start(self, start: int, first_speech: int, floor: int) -> int:
        """The start of an utterance whose first speech frame is `first_speech` (its own start: `start`)."""
        span, self.span = self.span, None
        if span is None or not span[0] < start or first_speech > span[1] + self.join:
            return start
        return max(span[0], floor)
