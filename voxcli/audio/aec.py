"""Acoustic echo cancellation in the capture path: the microphone minus what the speaker played.

Why: on laptop speakers the microphone hears the assistant's reply, the ASR
transcribes it, and `chat` interrupts itself. Every mature voice stack runs
WebRTC's AEC3 between speaker and microphone; this is that stage, on 10 ms
frames at the capture rate.

The package is `pywebrtc-audio` (WebRTC's AEC3, noise suppression and AGC2
in one C++ extension, numpy only). LiveKit's `livekit` wraps the same module
and measured better on `benchmarks/bench_aec.py` (ERLE 32.6 against 29.2 dB,
~80 against ~270 us of CPU per 10 ms frame), but its Rust runtime panics at
interpreter exit now and then ("panic in a function that cannot unwind",
SIGABRT), which turned `chat`'s exit codes into -6; 29 dB is past the 25 dB
target and 2.7 % of a core is affordable. It is a dependency for the Pythons
it has wheels for (3.10-3.14); where it cannot be imported, `unavailable()`
says why and the caller falls back (chat: half-duplex, one warning line).

The far end comes from a `voxcli.audio.aec_ref.ReferenceTimeline` fed by the
output callback (exactly what the DAC gets, after any resampling, stamped
with PortAudio's times); each captured frame, stamped the same way, is given
the reference that was playing when it was captured, shifted by `margin_ms`
so the echo always follows its reference (AEC3 cannot cancel an echo that comes
before its reference) and its own delay estimator finds the rest (0-400 ms).
On the PulseAudio null sink the echo lags the stamped reference by 0.1-0.4 ms
(21 ms with a 100 ms output latency), constant over a run: the stamps measured
the device path's delay, whatever PulseAudio buffered.

AEC3 hides the user while both talk, so each raw frame and its reference also
go to a double-talk detector (`voxcli.audio.doubletalk`); its onsets reach
`EchoCanceller.on_near_speech` (chat pauses the reply on them), and each
frame's raw spectrum masked by its echo bound is kept a second, and its raw
samples and reference three (`voxcli.audio.echo_mask`: chat patches the user's
first word back with the echo subtracted, `voxcli.audio.echo_path`).

What AEC3 leaves of the echo (a reverberant room's tail past its ~52 ms filter,
a saturated speaker's distortion, the syllables it leaks while it converges or
after the path jumps) is taken down by 12 dB (`residual_echo.FLOOR_DB`) where the detector finds
nothing of the user's in the raw microphone (`voxcli.audio.residual_echo`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Final, Iterator

import numpy as np

from voxcli.audio.aec_ref import Anchor, ReferenceTimeline
from voxcli.audio.doubletalk import FAR_ACTIVE, DoubleTalkDetector
from voxcli.audio.echo_mask import EchoMask
from voxcli.audio.residual_echo import ResidualGate

WARMUP_WINDOW_S: Final = 0.3
"""During the warm-up a frame is muted when the far end plays within this much of its time."""
ERLE_AFTER_S: Final = 2.0
"""Far-end speech AEC3 gets to converge before `EchoLoss` counts (the issue's "ERLE after 2 s")."""
HOLD_S: Final = 0.2
"""Longest the capture waits for the reference of a frame to be tapped."""
DELAY_PROBE_S: Final = 0.2
"""Noise through a spare canceller to measure how late its output comes (`output_delay`)."""
DELAY_MIN_CORR: Final = 0.5
"""The probe's output must be this much its input at one lag (AEC3 with no far end: 0.97) for a delay."""
PACKAGE: Final = "pywebrtc-audio"
INSTALL_HINT: Final = "pip install pywebrtc-audio (wheels for CPython 3.10-3.14)"


def unavailable() -> str | None:
    """Why the echo canceller cannot run here, or None when it can (for `doctor` and the fallback)."""
    try:
        import pywebrtc_audio

        pywebrtc_audio.AudioProcessor(16000, 1, echo_cancellation=True)
    except Exception as e:  # noqa: BLE001 - ImportError, or the native library failing to load
        return f"echo cancellation unavailable: {PACKAGE} cannot be loaded ({type(e).__name__}: {e})"
    return None


@dataclass(frozen=True)
class AECConfig:
    """What the capture stage does besides cancelling the echo."""

    ns: bool = False
    """WebRTC noise suppression (off by default: not measured to help the ASR)."""
    agc: bool = False
    """WebRTC automatic gain control (AGC2), for quiet microphones."""
    warmup_s: float = 1.0
    """Until AEC3 has heard this much far-end speech, frames during far-end speech are muted: it
    converges in ~0.75 s and leaks the reply's first words meanwhile (2-10 dB of ERLE, measured on the
    null sink), enough for the ASR to hear "that looks good" in "tomorrow looks bright". Costs the
    user nothing but a barge-in within the first second or so of the first reply of a session."""
    margin_ms: float = 20.0
    """A frame is given the reference played this much *after* its capture time: the echo then
    follows its reference by this plus the true path delay, so stamps that overstate the delay by
    up to this much still give AEC3 a causal echo (it finds 0-400 ms)."""
    residual_gate: bool = True
    """Attenuate what AEC3 leaves of the echo where the double-talk detector hears only the reply
    (`voxcli.audio.residual_echo`; needs `double_talk`)."""
    double_talk: bool = True
    """Tell `EchoCanceller.on_near_speech` when the user starts talking over the far end, from the
    raw microphone (`voxcli.audio.doubletalk`): AEC3's output hides the user for up to ~1 s then."""


@dataclass
class EchoLoss:
    """Energy of the raw microphone and of the canceller's output over the frames where the far end plays,
    from `ERLE_AFTER_S` of far-end speech on: with nobody talking, `db()` is the echo return loss
    enhancement measured on the devices themselves (benchmarks/bench_barge_in.py --self-turns)."""

    far_frames: int = 0
    raw: float = 0.0
    out: float = 0.0

    def add(self, playing: bool, near: np.ndarray, y: np.ndarray) -> None:
        """One frame: the raw microphone, the output, and whether the far end played (`FAR_ACTIVE`)."""
        if not playing:
            return
        self.far_frames += 1
        if self.far_frames > ERLE_AFTER_S * 100:
            self.raw += float(np.dot(near, near))
            self.out += float(np.dot(y, y))

    def db(self, since: "EchoLoss | None" = None) -> float | None:
        """10 log10(raw / output) over what was counted (after `since`, a copy taken earlier); None: nothing."""
        raw, out = self.raw - (since.raw if since else 0.0), self.out - (since.out if since else 0.0)
        return None if raw <= 0 else round(10.0 * np.log10(raw / max(out, 1e-20)), 1)


class WebRTCAPM:
    """WebRTC's audio processing module through pywebrtc-audio: float32 10 ms frames in and out."""

    def __init__(self, rate: int, config: AECConfig = AECConfig()) -> None:
        import pywebrtc_audio

        def make(ns: bool, agc: bool) -> Any:
            # stream_delay_ms 0: the frames come aligned by their stamps already (AEC3 finds 0-400 ms more)
            return pywebrtc_audio.AudioProcessor(rate, 1, echo_cancellation=True, noise_suppression=ns,
                                                 high_pass_filter=True, auto_gain_control=agc, stream_delay_ms=0)

        self._apm = make(config.ns, config.agc)
        self._make, self._rate = make, rate

    @functools.cached_property
    def delay(self) -> int | None:
        """Samples the output lags the input: AEC3 works on 64-sample blocks and hands a 10 ms frame back
        128 samples late at 16 kHz (pywebrtc-audio 0.2). Measured on a spare processor when first asked
        (`output_delay`, ~10 ms), not assumed; chat does not ask."""
        return output_delay(self._make(False, False), self._rate)

    def process(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
        """One 10 ms frame: the near end with the echo of `far` removed."""
        return np.asarray(self._apm.process(np.ascontiguousarray(near, np.float32),
                                            np.ascontiguousarray(far, np.float32)), np.float32)


def output_delay(apm: Any, rate: int) -> int | None:
    """Samples `apm`'s output lags its input, measured on `DELAY_PROBE_S` of noise with no far end (~10 ms for
    AEC3); None when no lag up to two frames explains the output (`DELAY_MIN_CORR`).

    Why: chat puts a span rebuilt from the raw microphone back into the output (the first word,
    `voxcli.chat.first_word`) at the output's own numbering of those samples, which the output holds
    this much later (AEC3: 128 samples at 16 kHz): the span's start skips 8 ms and its end's join plays
    8 ms twice. Placed where the output holds them, the barging-in user's WER rose
    (`benchmarks/aec_session.py words --place seamless`), so chat keeps its placement."""
    frame = rate // 100
    x = (np.random.default_rng(0).standard_normal(int(DELAY_PROBE_S * 100) * frame) * 0.05).astype(np.float32)
    silence = np.zeros(frame, np.float32)
    y = np.concatenate([np.asarray(apm.process(x[i : i + frame], silence), np.float32).reshape(-1)
                        for i in range(0, x.size, frame)])
    half = x.size // 2  # past the high-pass filter's start
    tail = y[half:]
    cc = [abs(float(np.dot(x[half - k : x.size - k], tail))) for k in range(2 * frame + 1)]
    k = int(np.argmax(cc))
    norm = float(np.sqrt(np.dot(x[half - k : x.size - k], x[half - k : x.size - k]) * np.dot(tail, tail)))
    return k if norm > 0 and cc[k] / norm >= DELAY_MIN_CORR else None


class EchoCanceller:
    """The capture-path stage: `process(block, t_capture)` -> the block without the speaker's echo.

    Blocks of any length at `rate`, each stamped with the clock time of its
    first sample (`voxcli.audio.aec_ref.capture_time`); they are cut into
    10 ms frames, so the output's count lags by less than a frame and its length
    varies by up to a frame (its content: `output_delay` more). `reference` is fed by the player's output tap.
    """

    def __init__(self, rate: int = 16000, config: AECConfig = AECConfig(), *,
                 reference: ReferenceTimeline | None = None, backend: Any = None) -> None:
        self.rate = rate
        self.frame = rate // 100
        self.config = config
        self.reference = reference if reference is not None else ReferenceTimeline(rate)
        if self.reference.rate != rate:
            raise ValueError(f"reference at {self.reference.rate} Hz, capture at {rate} Hz")
        self._backend = backend if backend is not None else WebRTCAPM(rate, config)
        self._margin = int(round(config.margin_ms * rate / 1000))
        self._carry = np.zeros(0, np.float32)
        self._anchor = Anchor(rate)  # captured sample count -> clock time
        self._count = 0  # samples received
        self.frames = 0
        self._hold = int(HOLD_S * rate)
        self._warmup = int(round(config.warmup_s * 100))  # far-end speech frames still to hear
        self._window = int(WARMUP_WINDOW_S * rate)
        self.frames_without_reference = 0
        """Frames cancelled against silence because nothing was tapped for their time (no speaker open)."""
        self.frames_too_late = 0
        """Frames captured so long ago that their reference had left the timeline (`aec_ref.KEEP_S`)."""
        self.detector = DoubleTalkDetector(rate) if config.double_talk else None
        self.mask = EchoMask(rate, self.detector.window) if self.detector is not None else None
        """The raw microphone masked by the detector's echo bound, frame by frame (its sample k is the input's,
        which the output holds `output_delay` later; chat patches its spans at the output's sample k)."""
        self.gate = ResidualGate() if self.detector is not None and config.residual_gate else None
        """AEC3's residual echo taken down where the detector hears only the reply (`voxcli.audio.residual_echo`)."""
        self.returned = 0
        """Output samples `process` has returned (those of the call in progress not yet)."""
        self.loss = EchoLoss()
        """The echo the canceller has taken off so far (ERLE, `EchoLoss.db`)."""
        self.on_near_speech: Callable[[], None] | None = None
        """Called (on the capture thread) when the detector sees the user start over the far end."""
        self._jumps = 0

    def process(self, block: np.ndarray, t_capture: float | None) -> np.ndarray:
        """Cancel the echo in `block` (captured from `t_capture` on; None: right after the last block).

        A frame whose reference has not been tapped yet waits for the next block (up to
        `HOLD_S` of audio), so the output may lag the input by that much when the output
        callback runs late; a speaker that taps nothing cannot hold the capture longer.
        """
        a = np.asarray(block, np.float32).reshape(-1)
        if t_capture is not None:
            self._place(t_capture)
        t_first = self._time_of(self._count - self._carry.size)  # the carry began before this block
        self._count += a.size
        x = np.concatenate([self._carry, a]) if self._carry.size else a
        known = self.reference.end
        if self.detector is not None and self._jumps != (jumps := self._anchor.jumps + self.reference.reanchors):
            self._jumps = jumps
            self.detector.reset()  # a placement jumped: no onset on this frame's say alone
            if self.mask is not None:
                self.mask.cut()  # nor a linear fit across it: the echo's delay moved
        out: list[np.ndarray] = []
        i = 0
        while x.size - i >= self.frame:
            at = self.reference.index_of(t_first + i / self.rate) + self._margin
            placed = True
            if at < known - self.reference.kept:
                self.frames_too_late += 1
                placed = False
            elif at + self.frame > known:
                if x.size - i < self._hold:
                    break  # not played yet as far as we know: wait for the tap
                self.frames_without_reference += 1
                placed = False
            far = self.reference.read(at, self.frame)
            y = self._backend.process(x[i : i + self.frame], far)
            playing = float(np.abs(far).max()) > FAR_ACTIVE
            if self.detector is not None:
                onsets = self.detector.onsets
                self._detect(x[i : i + self.frame], far, placed)
                if self.gate is not None:
                    y = self.gate.apply(y, self.detector.echo_power, self.detector.speech, self.detector.share,
                                        self.detector.onsets != onsets, echo_heard=self.detector.delay.lag is not None)
            self.loss.add(playing, x[i : i + self.frame], y)
            if self._warmup > 0:
                y = self._warm_up(playing, y, at)
            out.append(y)
            self.frames += 1
            i += self.frame
        self._carry = x[i:].copy()
        self.returned += len(out) * self.frame
        return np.concatenate(out) if out else np.zeros(0, np.float32)

    def _detect(self, near: np.ndarray, far: np.ndarray, placed: bool) -> None:
        """Double talk on the raw frame; an onset is told only once AEC3 has converged, with a known reference."""
        assert self.detector is not None and self.mask is not None
        onset = self.detector.update(near, far)
        self.mask.record(self.detector.spectrum if placed else None, self.detector.band, self.detector.above,
                         near, far if placed else np.zeros_like(far))
        if not placed:
            self.detector.reset()  # the far end of this frame is unknown: its echo would look like the user
        elif onset and self._warmup <= 0 and self.on_near_speech is not None:
            self.on_near_speech()

    def _warm_up(self, playing: bool, y: np.ndarray, at: int) -> np.ndarray:
        """Mute `y` while the far end plays near its time, until AEC3 has converged (`playing`: this
        frame's far end does).

        "Near": within `WARMUP_WINDOW_S` either way, which covers the room's tail and
        stamps that are off by that much (a capture re-anchored on a bad stamp).
        """
        if playing:
            self._warmup -= 1
        w = self._window
        if self.reference.peak(at - w, 2 * w + self.frame) > FAR_ACTIVE:  # 10 ms block peaks: O(1) per frame
            return np.zeros_like(y)
        return y

    @property
    def output_delay(self) -> int | None:
        """Samples the output lags the input (`WebRTCAPM.delay`, measured when first asked; None: unknown, as for
        a backend that does not say): output sample k + output_delay holds input sample k, the mask's and its
        raw ring's sample k (`output_delay`: why chat keeps its spans at k)."""
        return getattr(self._backend, "delay", None)

    def report(self) -> str:
        """One line on how the echo path behaved (chat logs it at the end with --verbose): how much later the
        echo came than the stamps put it (a Bluetooth speaker's unreported buffer shows here), the ERLE, the
        double-talk onsets."""
        d = self.detector
        measured = d is not None and d.delay.lag is not None
        where = (f"{1000 * self.late_echo_s:.0f} ms later than the devices' timestamps say" if measured
                 else "delay not measured")
        gated = ("" if self.gate is None
                 else f"; residual gated on {self.gate.gated / max(self.frames, 1):.0%} of frames")
        return (f"echo canceller: {self.loss.far_frames / 100:.1f} s of reply heard; echo {where}; "
                f"ERLE {self.loss.db()} dB (from {ERLE_AFTER_S:g} s of reply on; the user's speech counts as echo "
                f"left){gated}; {0 if d is None else d.onsets} double-talk onsets")

    @property
    def late_echo_s(self) -> float:
        """How much later than the stamps place it the echo comes (s; 0 until the detector measured it, under 0
        where the stamps overstate the delay): a room's path, a Bluetooth speaker's unreported buffer. Chat
        rebuilds the user's first word that much further past a pause (`voxcli.chat.listening`): the echo,
        and AEC3's hold on the user, go on as long."""
        d = self.detector
        if d is None or d.delay.lag is None:
            return 0.0
        return d.delay.lag / self.rate - self.config.margin_ms / 1000.0

    @property
    def reanchors(self) -> int:
        """Jumps in the capture stamps (blocks dropped) since the start."""
        return self._anchor.jumps

    def _place(self, t: float) -> None:
        self._anchor.place(t, self._count)

    def _time_of(self, count: int) -> float:
        return self.reference.t0 if self._anchor.t is None else self._anchor.time_of(count)


class CancelledMic:
    """A `voxcli.audio.devices.MicCapture` whose blocks come out with the echo removed."""

    def __init__(self, mic: Any, canceller: EchoCanceller) -> None:
        if mic.rate != canceller.rate:
            raise ValueError(f"microphone at {mic.rate} Hz, canceller at {canceller.rate} Hz")
        self.mic, self.canceller = mic, canceller
        self.rate = mic.rate

    def read(self, timeout: float = 0.1) -> np.ndarray | None:
        block = self.mic.read(timeout)
        if block is None:
            return None
        return self.canceller.process(block, getattr(self.mic, "block_time", None))

    def __iter__(self) -> Iterator[np.ndarray]:
        for block in self.mic:  # the mic's read() stamps `block_time` before yielding the block
            out = self.canceller.process(block, getattr(self.mic, "block_time", None))
            if out.size:
                yield out

    def close(self) -> None:
        self.mic.close()

    def __enter__(self) -> "CancelledMic":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
