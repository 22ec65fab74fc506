"""Speaker and microphone through sounddevice (PortAudio), with bounded buffers.

Why a callback stream and our own buffer: the audio thread must never wait on
synthesis, and the producer must never run unboundedly ahead of the speaker.
`Player.write()` blocks (with timeouts) while more than `max_buffer_s` is
queued, `drain()` waits until everything has played, `close()`/`abort()` stops
the sound at once (Ctrl-C). sounddevice is imported lazily: it raises OSError
at import when libportaudio is missing, which is as much "no audio device" as
an empty device list, so both become DeviceUnavailableError with a hint.
The hints here are neutral (the engine does not know which command runs);
`voxcli.cli.errors` replaces them with per-command advice.
"""
from __future__ import annotations

import queue
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Final, Iterator

import numpy as np

from voxcli.audio.aec_ref import PlayHead, capture_time, playback_time
from voxcli.audio.pcm import StreamResampler
from voxcli.errors import DeviceUnavailableError

NO_PORTAUDIO_HINT: Final = "install PortAudio (Debian/Ubuntu: apt-get install libportaudio2), or work with audio files"
DEVICE_HINT: Final = "see the available devices with `voxcli devices`"


def _sd() -> Any:
    try:
        import sounddevice
    except (OSError, ImportError) as e:  # libportaudio missing
        raise DeviceUnavailableError(f"audio unavailable: PortAudio cannot be loaded ({e})",
                                     hint=NO_PORTAUDIO_HINT) from None
    return sounddevice


def portaudio_error() -> str | None:
    """Why PortAudio cannot be used here, or None when it loads (for `doctor` and test skips)."""
    try:
        _sd()
    except DeviceUnavailableError as e:
        return e.message
    return None


def rescan() -> None:
    """Make PortAudio enumerate the devices again.

    PortAudio lists devices once, when it is initialised (at the first
    `import sounddevice`); a headset plugged in or a sound server started
    after that stays invisible to this process. sounddevice's documented way
    to refresh is to terminate and re-initialise the library, which closes
    every open stream, so call this only when none is open.
    """
    sd = _sd()
    sd._terminate()
    sd._initialize()


def _start(open_stream: Callable[..., Any], what: str, **kwargs: Any) -> Any:
    """Open and start a PortAudio stream; any failure is a DeviceUnavailableError naming `what`."""
    try:
        stream = open_stream(channels=1, dtype="float32", **kwargs)
        stream.start()
    except Exception as e:  # noqa: BLE001 - PortAudioError and friends
        raise DeviceUnavailableError(f"cannot open {what}: {e}", hint=DEVICE_HINT) from None
    return stream


def _stop(stream: Any) -> None:
    """Abort and close a stream at once; a stream that is already gone is fine."""
    try:
        stream.abort()
        stream.close()
    except Exception:  # noqa: BLE001
        pass


def list_devices() -> list[DeviceInfo]:
    """All PortAudio devices (empty when PortAudio has none)."""
    sd = _sd()
    try:
        devices = sd.query_devices()
        apis = sd.query_hostapis()
        default_in, default_out = (sd.default.device if sd.default.device is not None else (-1, -1))
    except Exception as e:  # noqa: BLE001 - PortAudioError without a device
        raise DeviceUnavailableError(f"cannot list audio devices: {e}", hint=DEVICE_HINT) from None
    out = []
    for d in devices:
        out.append(DeviceInfo(
            index=int(d["index"]), name=str(d["name"]), hostapi=str(apis[d["hostapi"]]["name"]),
            max_input_channels=int(d["max_input_channels"]), max_output_channels=int(d["max_output_channels"]),
            default_samplerate=float(d["default_samplerate"]),
            default_input=int(d["index"]) == default_in, default_output=int(d["index"]) == default_out,
        ))
    return out


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    hostapi: str
    max_input_channels: int
    max_output_channels: int
    default_samplerate: float
    default_input: bool
    default_output: bool


def _pick(device: int | str | None, kind: str) -> tuple[int | None, dict[str, Any]]:
    """Resolve `--device` (index, exact or partial name, or None for the default) for input/output."""
    sd = _sd()
    channels = "max_output_channels" if kind == "output" else "max_input_channels"
    if isinstance(device, str) and device.strip().isdigit():
        device = int(device)
    try:
        if isinstance(device, str):
            matches = [d for d in sd.query_devices() if d[channels] > 0 and device.lower() in d["name"].lower()]
            exact = [d for d in matches if d["name"].lower() == device.lower()]
            matches = exact or matches
            if not matches:
                names = ", ".join(f"{d['index']}: {d['name']}" for d in sd.query_devices() if d[channels] > 0)
                raise DeviceUnavailableError(f"no {kind} device matches {device!r} (available: {names or 'none'})",
                                             hint=DEVICE_HINT)
            info = matches[0]
        else:
            info = sd.query_devices(device, kind=kind)
    except DeviceUnavailableError:
        raise
    except Exception as e:  # noqa: BLE001 - PortAudioError / ValueError when there is no device
        raise DeviceUnavailableError(f"no audio {kind} device: {e}", hint=DEVICE_HINT) from None
    if info[channels] < 1:
        raise DeviceUnavailableError(f"device {info['name']!r} has no {kind} channels", hint=DEVICE_HINT)
    return int(info["index"]), info


def _device_rate(sd: Any, index: int, info: dict[str, Any], want: int, kind: str) -> int:
    """`want` if the device accepts it, else its default rate (we resample)."""
    check = sd.check_output_settings if kind == "output" else sd.check_input_settings
    try:
        check(device=index, samplerate=want, channels=1, dtype="float32")
        return want
    except Exception:  # noqa: BLE001
        return int(info["default_samplerate"])


class Player:
    """Plays float32 mono chunks on an output device through a bounded buffer."""

    def __init__(self, sample_rate: int, device: int | str | None = None, *,
                 max_buffer_s: float = 2.0, latency: str | float = "low",
                 on_played: Callable[[np.ndarray, float, int], None] | None = None) -> None:
        sd = _sd()
        self.on_played = on_played
        """Echo-canceller tap: (samples at device_rate, monotonic time they are heard, device_rate) per callback."""
        index, info = _pick(device, "output")
        self.device_name = str(info["name"])
        self.sample_rate = sample_rate
        self.device_rate = _device_rate(sd, index, info, sample_rate, "output")
        self._resampler = StreamResampler(sample_rate, self.device_rate) if self.device_rate != sample_rate else None
        self._max = int(max_buffer_s * self.device_rate)
        self._buf: deque[np.ndarray] = deque()
        self._offset = 0  # samples of _buf[0] already played
        self._queued = 0  # samples in _buf not yet played
        self._cond = threading.Condition()
        self._closed = False
        self.underflows = 0
        self.played_samples = 0
        """Device-rate samples handed to PortAudio (heard an output latency later: `heard()`)."""
        self.epoch = 0
        """Bumped by `flush()`: a write that began before it is dropped."""
        self._accepted = 0  # play-head index (at sample_rate) of the next sample written
        self._paused = False  # `pause()`: the callback plays silence, the queue waits
        self._pause_until: float | None = None  # monotonic time a pause expires by itself (None: never)
        self._tail_due = False  # the resampler holds input that `drain` must flush out
        self._head = PlayHead(self.device_rate)
        self._latency = 0.0  # the stream's output latency, read once it is open (0 during its first callbacks)
        self._stream = _start(sd.OutputStream, f"audio output {self.device_name!r}", samplerate=self.device_rate,
                              device=index, latency=latency, callback=self._callback)
        self._latency = float(getattr(self._stream, "latency", 0.0) or 0.0)

    def _callback(self, outdata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
        # Runs on the PortAudio thread: copy what is queued, pad with silence, never block.
        out = outdata[:, 0]
        filled = 0
        t_dac = playback_time(time_info, self._latency)
        with self._cond:
            if status and status.output_underflow:
                self.underflows += 1
            if self._paused and self._pause_until is not None and time.monotonic() >= self._pause_until:
                self._paused = False  # nothing resumed or flushed it in time: play on (`pause`)
            while filled < frames and self._buf and not self._paused:
                head = self._buf[0]
                n = min(frames - filled, head.size - self._offset)
                out[filled:filled + n] = head[self._offset:self._offset + n]
                filled += n
                self._offset += n
                if self._offset >= head.size:
                    self._buf.popleft()
                    self._offset = 0
            self._queued -= filled
            self._head.record(self.played_samples, t_dac, filled)
            self.played_samples += filled
            self._cond.notify_all()
        out[filled:] = 0.0
        if self.on_played is not None:  # what the DAC gets, resampled and padded: the AEC's reference
            self.on_played(out.copy(), t_dac, self.device_rate)

    @property
    def buffered_s(self) -> float:
        return self._queued / float(self.device_rate)

    def write(self, audio: np.ndarray, timeout: float | None = None, *, epoch: int | None = None,
              ahead_s: float | None = None) -> int | None:
        """Queue audio; blocks while the buffer is full (wakes every 50 ms; stops if closed).

        `ahead_s`: wait only until no more than this is queued, then take the whole block (a
        writer that keeps the device that far ahead whatever its block sizes). Returns the
        play-head index (`heard()`'s count, at `sample_rate`) of its first sample, or None
        when it was dropped: closed, or flushed since `epoch` (default: now).
        """
        audio = np.asarray(audio, np.float32).reshape(-1)
        epoch = self.epoch if epoch is None else epoch
        n_in = audio.size
        if self._resampler is not None:
            audio = self._resampler.process(audio)
        deadline = None if timeout is None else time.monotonic() + timeout
        room = self._max - audio.size if ahead_s is None else int(ahead_s * self.device_rate)
        with self._cond:
            while self._queued > room and self._queued > 0 and not self._closed and epoch == self.epoch:
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError("audio output did not accept data in time")
                self._cond.wait(0.05)
            if self._closed or epoch != self.epoch:
                return None
            at, self._accepted = self._accepted, self._accepted + n_in
            self._tail_due = self._resampler is not None
            if audio.size:
                self._buf.append(audio.copy())
                self._queued += audio.size
            return at

    def heard(self, now: float | None = None) -> int:
        """Samples (at `sample_rate`) that had reached the listener by `now` (monotonic; default now).

        From the callbacks' DAC stamps (`voxcli.audio.aec_ref.PlayHead`): what was
        handed to the device minus what its output latency still holds.
        """
        with self._cond:
            return self._at_rate(self._head.heard(time.monotonic() if now is None else now))

    def flush(self) -> int:
        """Drop the queued audio, keep the stream running (barge-in: silence within the output
        latency, no new stream to open). Writes begun before it are dropped.

        Returns what the listener *will have heard* (at `sample_rate`): everything handed to
        PortAudio, since the audio already in the device's buffer still plays after the flush
        (one output latency). The history keeps the words the user heard, and those are heard;
        `heard()` at this moment would drop them.
        """
        with self._cond:
            self.epoch += 1
            self._buf.clear()
            self._offset = self._queued = 0
            self._paused, self._pause_until = False, None
            if self._resampler is not None:  # its history is the dropped audio's
                self._resampler = StreamResampler(self.sample_rate, self.device_rate)
            self._tail_due = False
            self._accepted = self._at_rate(self.played_samples)  # what is in the device's buffer still plays
            self._cond.notify_all()
            return self._accepted

    def pause(self, max_s: float | None = None) -> None:
        """Play silence from the next callback on, keeping the queue (a possible barge-in: `resume` or `flush`).

        `max_s`: it ends by itself after that long. Whoever paused may never come back (the input
        ended, a stuck ASR worker), and a paused queue would block `write` and `drain` for good.
        """
        with self._cond:
            self._paused = True
            self._pause_until = None if max_s is None else time.monotonic() + max_s

    def resume(self) -> None:
        with self._cond:
            self._paused, self._pause_until = False, None
            self._cond.notify_all()

    def _at_rate(self, device_samples: int) -> int:
        if self.device_rate == self.sample_rate:
            return device_samples
        return int(round(device_samples * self.sample_rate / self.device_rate))

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until everything written has been played (plus the device latency)."""
        with self._cond:  # a flush cannot come between: its fresh resampler has no tail (`_tail_due`)
            if self._resampler is not None and self._tail_due:
                tail = self._resampler.process(np.zeros(0, np.float32), last=True)
                if tail.size:
                    self._buf.append(tail)
                    self._queued += tail.size
                # a flushed soxr stream takes no more input ("Input after last input"): the next
                # reply on this stream (chat drains after every reply) starts a fresh one, once
                self._resampler = StreamResampler(self._resampler.from_rate, self._resampler.to_rate)
                self._tail_due = False
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._queued > 0 and not self._closed:
                if deadline is not None and time.monotonic() > deadline:
                    return False
                self._cond.wait(0.05)
        if not self._closed:
            time.sleep(self._latency)
        return True

    def abort(self) -> None:
        """Stop at once, dropping queued audio (Ctrl-C, barge-in)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._buf.clear()
            self._queued = 0
            self._cond.notify_all()
        _stop(self._stream)

    close = abort

    def __enter__(self) -> "Player":
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()


class MicCapture:
    """Microphone samples at `rate` (16 kHz for ASR), captured natively and resampled if needed."""

    def __init__(self, rate: int = 16000, device: int | str | None = None, *,
                 block_s: float = 0.032, max_queue_s: float = 10.0) -> None:
        sd = _sd()
        index, info = _pick(device, "input")
        self.device_name = str(info["name"])
        self.rate = rate
        self.device_rate = _device_rate(sd, index, info, rate, "input")
        self._resampler = StreamResampler(self.device_rate, rate) if self.device_rate != rate else None
        blocksize = max(1, int(block_s * self.device_rate))
        self._queue: queue.Queue[tuple[np.ndarray, float]] = queue.Queue(maxsize=max(1, int(max_queue_s / block_s)))
        self.block_time: float | None = None
        """Monotonic time the first sample of the block `read()` last returned was captured (for the AEC)."""
        self.overflows = 0
        self._closed = False
        self._latency = 0.0  # the stream's input latency, read once it is open (0 during its first callbacks)
        self._stream = _start(sd.InputStream, f"microphone {self.device_name!r}", samplerate=self.device_rate,
                              device=index, blocksize=blocksize, callback=self._callback)
        self._latency = float(getattr(self._stream, "latency", 0.0) or 0.0)

    def _callback(self, indata: np.ndarray, frames: int, time_info: Any, status: Any) -> None:
        # PortAudio thread: hand a copy over; if the consumer is stuck, drop the oldest block.
        block = (indata[:, 0].copy(), capture_time(time_info, frames, self.device_rate, self._latency))
        try:
            self._queue.put_nowait(block)
        except queue.Full:
            self.overflows += 1
            try:
                self._queue.get_nowait()
                self._queue.put_nowait(block)
            except (queue.Empty, queue.Full):
                pass

    def read(self, timeout: float = 0.1) -> np.ndarray | None:
        """Next block at `rate` (None if nothing arrived within `timeout`)."""
        try:
            block, self.block_time = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        return self._resampler.process(block) if self._resampler is not None else block

    def __iter__(self) -> Iterator[np.ndarray]:
        while not self._closed:
            block = self.read()
            if block is not None and block.size:
                yield block

    def close(self) -> None:
        self._closed = True
        _stop(self._stream)

    def __enter__(self) -> "MicCapture":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
