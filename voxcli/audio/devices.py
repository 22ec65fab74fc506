"""Devices through sounddevice (PortAudio): finding them, opening streams, the microphone.

The speaker is `voxcli.audio.player.Player`; both open their streams here.
sounddevice is imported lazily: it raises OSError
at import when libportaudio is missing, which is as much "no audio device" as
an empty device list, so both become DeviceUnavailableError with a hint.
The hints here are neutral (the engine does not know which command runs);
`voxcli.cli.errors` replaces them with per-command advice.
"""
from __future__ import annotations

import queue
from dataclasses import dataclass
from typing import Any, Callable, Final, Iterator

import numpy as np

from voxcli.audio.aec_ref import capture_time
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
