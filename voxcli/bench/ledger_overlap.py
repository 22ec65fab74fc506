"""How much of the ASR tail the engine really runs during the endpoint hold.

The seed's rule is that, after the user stops, the hold and the ASR tail run
in parallel, so only the longer one counts. An engine may not live by it: if
the final decode starts only once the hold has fired, the turn pays hold +
tail. This measures what the installed streamer does, with the configuration
in force (hold, agreement, step), on real speech:

1. the speech (beckett.wav, cut at the end of its last word, see
   `_last_utterance`) is fed fast up to `lead_s` before its end, then at real
   time, then digital silence at real time;
2. end of speech = the wall time the last speech sample is due;
3. stamps after it: the endpoint decision (a confirmed speculation, when the
   engine speculates), the moment the final transcript existed (the confirmed
   speculative decode, else the final caption) and the final caption;
4. `tail_ms` = the final decode alone: median of 3 decodes of the last
   utterance (offline VAD segmentation, padded as the streamer pads it);
5. the tail started at ready - tail; the hold started at confirm - hold (the
   VAD's decay after the last speech sample); the overlap achieved is the
   part of the decode that ran while the hold was counting.
"""
from __future__ import annotations

import statistics
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

SAMPLE_RATE = 16000
BLOCK = 512  # 32 ms, the size a microphone callback delivers
HOP = 160  # 10 ms energy hop


@dataclass(frozen=True)
class Overlap:
    """One measured end-of-speech timeline (ms after the last speech sample; medians of the runs)."""

    hold_ms: float
    """The hold configured (what the engine counts from its VAD's first silence frame)."""
    tail_ms: float
    """The final decode alone."""
    confirm_ms: float
    """End of speech -> endpoint decision (the speculation confirmed; without one: final - tail)."""
    ready_ms: float
    """End of speech -> the final transcript existed (the confirmed speculative decode; else the final)."""
    final_ms: float
    """End of speech -> the final caption reached the caller."""
    speculative: bool
    """The engine decoded during the hold (a SpeculativeFinal was confirmed)."""
    runs: list[float]
    """final_ms of each run."""
    model: str = ""
    """The recognizer measured: chat's (`asr.models.chat_asr`), the one the turn runs; "+" its finals' (two passes)."""

    @property
    def hold_start_ms(self) -> float:
        """When the hold began counting: the VAD's decay after the last speech sample."""
        return max(0.0, self.confirm_ms - self.hold_ms)

    @property
    def asr_start_ms(self) -> float:
        return max(0.0, self.ready_ms - self.tail_ms)

    @property
    def overlap_ms(self) -> float:
        """The part of the final decode that ran while the hold was counting."""
        return max(0.0, min(self.confirm_ms, self.ready_ms) - max(self.hold_start_ms, self.asr_start_ms))

    @property
    def possible_overlap_ms(self) -> float:
        return min(self.hold_ms, self.tail_ms)

    def to_dict(self) -> dict[str, Any]:
        d = {k: round(v, 2) if isinstance(v, float) else v for k, v in asdict(self).items()}
        d["runs"] = [round(r, 2) for r in self.runs]
        extra = {k: round(getattr(self, k), 2)
                 for k in ("hold_start_ms", "asr_start_ms", "overlap_ms", "possible_overlap_ms")}
        return {**d, **extra}


def _speech(offline: bool | None) -> np.ndarray:
    from voxcli.audio.files import read_audio
    from voxcli.hub.resolve import resolve_model

    wav = resolve_model("speech-samples", kind="data", offline=offline).file("beckett.wav")
    audio, _ = read_audio(wav, rate=SAMPLE_RATE)
    return np.asarray(audio, dtype=np.float32)


def _listen(streamer: Any, stamps: dict[str, list[float]]) -> threading.Thread:
    # Wall times of final captions (reader thread) and of confirmed speculations (worker-thread callback).
    def on_event(ev: Any) -> None:
        now = time.monotonic()
        kind = type(ev).__name__
        if kind == "SpeculativeFinal":
            stamps["speculated"].append(now)
        elif kind == "SpeculationEnd" and getattr(ev, "outcome", "") == "confirmed":
            stamps["confirmed"].append(now)
            stamps["ready"].append(stamps["speculated"][-1] if stamps["speculated"] else now)

    if callable(getattr(streamer, "subscribe", None)):
        streamer.subscribe(on_event)

    def run() -> None:
        for ev in streamer.captions:
            if getattr(ev, "is_final", False):
                stamps["final"].append(time.monotonic())

    th = threading.Thread(target=run, name="voxcli-ledger-overlap", daemon=True)
    th.start()
    return th


def _one_run(streamer: Any, audio: np.ndarray, hold_ms: float, lead_s: float) -> dict[str, float | None]:
    """Feed one clip as described in the module docstring; each stamp in ms after the end of speech."""
    stamps: dict[str, list[float]] = {"final": [], "speculated": [], "confirmed": [], "ready": []}
    reader = _listen(streamer, stamps)
    lead = max(0, audio.size - int(lead_s * SAMPLE_RATE))
    streamer.send(audio[:lead])
    deadline = time.monotonic() + 30.0
    while streamer.pending_s > 0 and time.monotonic() < deadline:  # let the worker catch up
        time.sleep(0.01)
    rest = np.concatenate([audio[lead:], np.zeros(int((hold_ms / 1000.0 + 3.0) * SAMPLE_RATE), np.float32)])
    t0 = time.monotonic()
    t_end = t0 + (audio.size - lead) / SAMPLE_RATE
    for i in range(0, rest.size, BLOCK):
        time.sleep(max(0.0, t0 + (i + BLOCK) / SAMPLE_RATE - time.monotonic()))
        streamer.send(rest[i : i + BLOCK], block=False)
        if any(s >= t_end for s in stamps["final"]):
            break
    streamer.finish()
    reader.join(5.0)

    def after(key: str) -> float | None:
        later = [s for s in stamps[key] if s >= t_end]
        return (later[0] - t_end) * 1000.0 if later else None

    if after("final") is None:
        raise RuntimeError("the streamer gave no final transcript after the end of speech")
    return {k: after(k) for k in ("final", "confirmed", "ready")}


def _last_utterance(vad: Any, audio: np.ndarray) -> tuple[int, int]:
    """(start, end of speech) of the clip's last utterance: VAD segment, end refined by 10 ms energy.

    The VAD scores speech for a while after it stops, and the clip's tail is room
    noise, so the end is the last 10 ms hop above -30 dB of the utterance's loudest.
    """
    from voxcli.asr.endpointer import VADConfig, speech_segments

    cfg = VADConfig()
    segments = list(speech_segments(vad, np.concatenate([audio, np.zeros(SAMPLE_RATE, np.float32)]), cfg))
    start, end = segments[-1] if segments else (0, audio.size)
    onset = min(audio.size, max(start + HOP, end - cfg.pad_samples))
    seg = audio[start:onset]
    n = seg.size // HOP
    rms = np.sqrt(np.mean(np.square(seg[: n * HOP].reshape(n, HOP), dtype=np.float64), axis=1) + 1e-12)
    above = np.nonzero(rms > rms.max() * 10 ** (-30 / 20))[0]
    return start, start + (int(above[-1]) + 1) * HOP if above.size else onset


def _tail_ms(model: Any, utterance: np.ndarray, runs: int = 3) -> float:
    model.transcribe(utterance)  # warm
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        model.transcribe(utterance)
        times.append((time.perf_counter() - t) * 1000.0)
    return statistics.median(times)


def _median(values: list[float | None]) -> float | None:
    real = [v for v in values if v is not None]
    return statistics.median(real) if len(real) == len(values) and real else None


def measure_overlap(*, hold_ms: float, agreement: int, step_ms: int, runs: int = 2, lead_s: float = 2.0,
                    offline: bool | None = None, streamer_options: dict[str, Any] | None = None,
                    model: str | None = None, final_model: str | None = None) -> Overlap:
    """Run the installed streamer `runs` times with this configuration; see the module docstring.

    `streamer_options`: more keyword arguments for `open_asr_streamer` (e.g. `speculative=False`); `final_model`:
    chat's second pass (`asr.models.chat_final_asr`), whose decode is then the tail.
    """
    import voxcli
    from voxcli.asr.models import chat_asr
    from voxcli.chat.turnlog import asr_name

    audio = _speech(offline)
    timelines: list[dict[str, float | None]] = []
    start = end = 0
    for i in range(runs):
        streamer = voxcli.open_asr_streamer(chat_asr(model), agreement=agreement, step_ms=step_ms, endpoint_ms=hold_ms,
                                            offline=offline, final_model=final_model, **(streamer_options or {}))
        if i == 0:
            start, end = _last_utterance(streamer.vad, audio)
            streamer.vad.reset()
        timelines.append(_one_run(streamer, audio[:end], hold_ms, lead_s))
    pad = np.zeros(int(0.2 * SAMPLE_RATE), dtype=np.float32)  # the streamer's 200 ms pad after the end
    tail = _tail_ms(streamer.final_model or streamer.model, np.concatenate([audio[start:end], pad]))
    final = statistics.median([float(t["final"]) for t in timelines])  # type: ignore[arg-type]
    confirmed, ready = _median([t["confirmed"] for t in timelines]), _median([t["ready"] for t in timelines])
    speculative = confirmed is not None and ready is not None
    return Overlap(hold_ms, tail, confirmed if speculative else max(0.0, final - tail),
                   ready if speculative else final, final, speculative,
                   [float(t["final"]) for t in timelines], asr_name(streamer))  # type: ignore[arg-type]
