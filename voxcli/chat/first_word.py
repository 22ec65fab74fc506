"""The user's first word given back to the ASR after a pause on a double-talk onset (`ListeningMixin`'s part).

AEC3 loses the first word of a user who starts under a loud reply. After the pause, the span around it is
rebuilt from the raw microphone (`voxcli.audio.echo_mask`: the echo subtracted by a fit, or masked) and
patched into the streamer's buffer, which was told at the onset to wait for it (`ASRStreamer.expect_patch`).
The fit runs on a thread of its own so the capture never waits for it; the patch is posted from the capture
thread, where the audio is sent, so it is numbered against the same inbox and patches keep their order.
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

from voxcli.asr.endpointer import SAMPLE_RATE
from voxcli.audio.echo_mask import PRE_S

FIT_WAIT_S = 1.0
"""Longest the capture thread waits for the last first word's fit (40-50 ms of one core) when a second pause
comes before it was posted, or input ends: past that the new span gets no patch (an empty one)."""


class FirstWordMixin:
    """Rebuilds and patches the first word; needs `asr`, `error`, `_fed`, `_masking` from the agent."""

    error: BaseException | None = None
    """The first error of the agent's threads (the agent's own; here so the mixin stands alone)."""
    _mask_at: tuple[int, int, int] | None = None
    """(fed sample of a pause on an onset, ASR samples dropped then, samples of the span after the pause): the
    span waits for that much audio (`POST_S`, the speaker's output latency, and the echo's measured delay past
    the stamps: the echo goes on that much longer after the pause, and AEC3 keeps the user down under it)."""
    _fitting: threading.Thread | None = None
    """The thread rebuilding the last first word (`_rebuild_first_word`), until its patch is posted."""
    _fitted: tuple[int, np.ndarray, int] | Exception | None = None
    """What it rebuilt: (fed sample, audio, ASR samples dropped at the pause), or what it raised."""

    def _patch_first_word(self) -> None:
        """Patch [pause - PRE_S, pause + POST_S + output latency + late echo) of what the ASR heard with the
        rebuilt raw microphone.

        Why: the onset comes up to ~0.3 s after the user's first word, which AEC3 lost under the
        loud reply it was cancelling, and AEC3 keeps the user down ~0.15 s after the reply falls
        silent too, which is the speaker's output latency after the pause (9 ms at PortAudio's low
        latency, ~50 ms once a stream reopened at the high one, `voxcli.audio.player`); the
        raw microphone minus the fitted echo keeps the user (`voxcli.audio.echo_path`, through a room
        `voxcli.audio.echo_subband`; the mask, `voxcli.audio.echo_mask`, where no fit can be trusted). Called
        from `feed` on the capture thread (that of `near_speech`), once the span's audio was fed: what the
        rebuild reads is copied here (`EchoMask.take`) and the fit, 40-50 ms of one core, runs on a thread of
        its own (`_rebuild_first_word`), so the capture goes on meanwhile (on the capture thread a fit held it
        100-300 ms in live runs, 2026-12-02); the next `feed` posts the patch
        (`_post_first_word`). The ASR waits for the patch (announced at the onset:
        `ASRStreamer.expect_patch`). Not done when the ASR dropped audio since the pause (its sample numbers
        moved).
        """
        (p, dropped, post), self._mask_at = self._mask_at, None
        if self._fitting is not None:  # two pauses within one fit (load): patches keep their onsets' order
            self._post_first_word(wait=FIT_WAIT_S)
        if self._dropped() != dropped or self._fitting is not None:
            self.asr.patch(0, np.zeros(0, np.float32))  # none comes: an empty patch ends the announced wait
            return
        c = self._masking
        off = self._fed - c.returned  # fed sample of the canceller's output sample 0 (all it returned was fed)
        # The mask numbers the canceller's input samples and the span goes at the same numbers of its output,
        # which holds them `output_delay` (128) samples later: the span's start skips 8 ms and the join at its
        # end plays 8 ms twice. Kept so: placed where the output holds them, the user's WER rose from 0.057 to
        # 0.092 over 80 recorded barge-ins (`benchmarks/aec_session.py words --place seamless`, 2026-12-03).
        span = c.mask.take(p - int(PRE_S * SAMPLE_RATE) - off, p + post - off)
        self._fitted = None
        self._fitting = threading.Thread(target=self._rebuild_first_word, args=(c.mask, span, off, dropped),
                                         name="voxcli-first-word", daemon=True)
        self._fitting.start()

    def _rebuild_first_word(self, mask: Any, span: Any, off: int, dropped: int) -> None:
        """Rebuild `span` (`_patch_first_word`'s thread); the capture thread posts it (`_post_first_word`)."""
        try:
            lo, audio = mask.rebuild(span)
            self._fitted = (lo + off, audio, dropped)
        except Exception as e:  # noqa: BLE001 - handed to the caller by `_post_first_word`
            self._fitted = e

    def _post_first_word(self, wait: float = 0.0) -> None:
        """Patch the ASR with the rebuilt first word once its thread is done (after waiting up to `wait` s for it).

        On the capture thread, as `feed`'s `send` is (and from `finish`, once input is over): the check that
        the ASR dropped nothing since the pause and the patch see the same inbox (a drop between them would
        number the patch wrong), and patches keep their onsets' order. An empty patch when nothing came of
        the rebuild, audio was dropped, or the fit raised (its error goes to `error`): it ends the wait the
        onset announced."""
        t = self._fitting
        if t is None:
            return
        if wait:
            t.join(wait)
        if t.is_alive():
            return
        self._fitting, got, self._fitted = None, self._fitted, None
        if isinstance(got, Exception):
            if self.error is None:
                self.error = got
            got = None
        if got is not None and got[1].size and self._dropped() == got[2]:
            self.asr.patch(got[0] - got[2], got[1])
        else:
            self.asr.patch(0, np.zeros(0, np.float32))

    def _dropped(self) -> int:
        """Samples the ASR's inbox dropped so far (drop-behind): its sample numbers skip them."""
        return int(round(getattr(getattr(self.asr, "stats", None), "dropped_s", 0.0) * SAMPLE_RATE))
