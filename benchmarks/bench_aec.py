#!/usr/bin/env python3
"""Echo cancellers compared on one echo path: pywebrtc-audio (AEC3) against LiveKit's APM (AEC3).

    python benchmarks/bench_aec.py            # both packages, the same room, one interleaved run
    python benchmarks/bench_aec.py --json     # one JSON line per package

The case (`voxcli.audio.aec_room`): voxcli's own voice (Piper joe, whole
synthesis, noise scales 0) is the far end, played at the voice's 22,050 Hz
through a room (soft-clipped speaker, 300 ms reverberation, 40 ms delay,
echo as loud as the far end) and heard by a 16 kHz microphone; the reference
the canceller gets is the played audio resampled to 16 kHz, as the output
callback's tap is. Two microphone signals: echo only (+ a -60 dBFS noise
floor), for ERLE after 2 s of convergence, and echo + a real talker (the
speech-samples Beckett recording, starting 5 s in: double-talk to the end,
and the barge-in case where the reply stops 0.3 s after the user starts), transcribed
by Moonshine tiny to see whether the user survives the cancellation (WER
against the known text; the same recording without echo is the baseline).

Figures: ERLE (dB) on far-end-only frames after 2 s, WER of the near end,
CPU per 10 ms frame (process time, min over the interleaved repeats; a
shared machine inflates it, read the ratio). Wheel coverage is not measured
here (`pip download --python-version X --platform P --only-binary=:all:`).
The last line runs voxcli's own stage (`voxcli.audio.aec`, pywebrtc-audio
underneath). livekit is not a voxcli dependency (its Rust runtime can abort
the process at exit, see voxcli/audio/aec.py): `pip install livekit` to
compare; without it only pywebrtc-audio is measured.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from voxcli.audio.aec_room import Room, echo_of, erle_db, rms  # noqa: E402

SR = 16000
FRAME = SR // 100
FAR_TEXT = ("Sure. The weather tomorrow looks bright, with a gentle breeze from the west and a high of "
            "twenty two degrees. In the evening there may be a light shower, so an umbrella would not hurt. "
            "Is there anything else you would like to know about the week ahead?")
BECKETT = "Ever tried. Ever failed. No matter. Try again. Fail again. Fail better."
NEAR_AT_S = 5.0
BARGE_IN_S = 0.3


class WebRTCAudio:
    """pywebrtc-audio's EchoCanceller (AEC3 with its high-pass filter; float32 in and out)."""

    name = "pywebrtc-audio"

    def __init__(self) -> None:
        import pywebrtc_audio

        self._p = pywebrtc_audio.EchoCanceller(SR, 1, 0)

    def process(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
        return self._p.process(near, far)


class LiveKitAPM:
    """livekit.rtc.AudioProcessingModule (int16 AudioFrames, processed in place)."""

    name = "livekit"

    def __init__(self) -> None:
        from livekit import rtc

        self._rtc = rtc
        self._p = rtc.AudioProcessingModule(echo_cancellation=True)
        self._p.set_stream_delay_ms(0)

    def _frame(self, a: np.ndarray):
        pcm = np.clip(np.round(a * 32767.0), -32768, 32767).astype(np.int16)
        return self._rtc.AudioFrame(pcm.tobytes(), SR, 1, FRAME)

    def process(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
        self._p.process_reverse_stream(self._frame(far))
        f = self._frame(near)
        self._p.set_stream_delay_ms(0)
        self._p.process_stream(f)
        return np.frombuffer(f.data, np.int16).astype(np.float32) / 32768.0


def make_case() -> dict[str, np.ndarray]:
    from voxcli.audio.files import read_audio
    from voxcli.audio.pcm import resample
    from voxcli.hub.resolve import resolve_model
    from voxcli.tts.streamer import load_voice

    engine = load_voice().engine
    engine.scales = np.array([0.0, engine.scales[1], 0.0], dtype=np.float32)
    far = engine.synthesize(FAR_TEXT).astype(np.float32) * 0.7
    rate = engine.sample_rate
    echo = resample(echo_of(far, rate, Room()), rate, SR)
    ref = resample(far, rate, SR)
    near, near_rate = read_audio(resolve_model("speech-samples", kind=None).file("beckett.wav"))
    near = resample(near, near_rate, SR)
    near = near * (rms(echo[echo != 0]) / max(rms(near), 1e-9))  # the user as loud as the echo
    n = max(ref.size, int(NEAR_AT_S * SR) + near.size) + SR
    n -= n % FRAME
    pad = lambda a, at=0: np.pad(a, (at, n - at - a.size)).astype(np.float32)  # noqa: E731
    noise = np.random.default_rng(1).normal(0, 1e-3, n).astype(np.float32)
    near_full = pad(near, int(NEAR_AT_S * SR))
    # barge-in: the reply stops BARGE_IN_S after the user starts (the echo's tail still rings on)
    cut = int((NEAR_AT_S + BARGE_IN_S) * rate)
    ref_cut, echo_cut = resample(far[:cut], rate, SR), resample(echo_of(far[:cut], rate, Room()), rate, SR)
    return {"far": far, "far_rate": np.array(rate), "ref": pad(ref), "echo": pad(echo), "near": near_full, "noise": noise,
            "mic_echo": pad(echo) + noise, "mic_talk": pad(echo) + near_full + noise,
            "ref_cut": pad(ref_cut), "mic_barge": pad(echo_cut) + near_full + noise}


def run(backend_cls, ref: np.ndarray, mic: np.ndarray) -> tuple[np.ndarray, float]:
    """Cancel frame by frame; (output, process seconds per frame)."""
    b = backend_cls()
    out = np.empty_like(mic)
    t0 = time.process_time()
    for i in range(0, mic.size, FRAME):
        out[i : i + FRAME] = b.process(mic[i : i + FRAME], ref[i : i + FRAME])
    return out, (time.process_time() - t0) / (mic.size // FRAME)


def transcribe(asr, audio: np.ndarray) -> str:
    return " ".join(w.text for w in asr.transcribe(audio)).strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from voxcli.bench.wer import word_errors
    from voxcli.hub.resolve import resolve_model
    from voxcli.runtimes.moonshine import MoonshineASR

    case = make_case()
    asr = MoonshineASR.load(resolve_model("moonshine-tiny-en", kind="asr").path)
    at = int(NEAR_AT_S * SR)
    span = slice(at - SR // 2, at + int(11 * SR))
    baseline = transcribe(asr, (case["near"] + case["noise"])[span])
    with_echo = transcribe(asr, case["mic_talk"][span])
    backends: list = [WebRTCAudio]
    try:
        import livekit.rtc  # noqa: F401

        backends.append(LiveKitAPM)
    except ImportError:
        pass
    cpu: dict[str, list[float]] = {b.name: [] for b in backends}
    res: dict[str, dict] = {}
    for k in range(args.repeats):  # interleaved, order alternating: both see the same load
        for b in backends[:: 1 if k % 2 == 0 else -1]:
            out, per_frame = run(b, case["ref"], case["mic_echo"])
            cpu[b.name].append(per_frame)
            s = slice(2 * SR, at)  # far end only, after 2 s of convergence
            res[b.name] = {"erle_db": round(erle_db(case["echo"][s], out[s]), 1)}
    for b in backends:
        out, _ = run(b, case["ref"], case["mic_talk"])
        text = transcribe(asr, out[span])
        barge, _ = run(b, case["ref_cut"], case["mic_barge"])
        barge_text = transcribe(asr, barge[span])
        res[b.name].update(
            barge_in_text=barge_text, barge_in_wer=round(word_errors(BECKETT, barge_text).rate, 3),
            cpu_us_per_10ms=round(min(cpu[b.name]) * 1e6, 1), near_text=text,
            near_wer=round(word_errors(BECKETT, text).rate, 3),
            double_talk_near_loss_db=round(
                10 * np.log10(rms(case["near"][at:]) ** 2 / max(rms(out[at:] - case["near"][at:]) ** 2, 1e-20)), 1),
        )
    summary = {"baseline_no_echo": {"text": baseline, "wer": round(word_errors(BECKETT, baseline).rate, 3)},
               "echo_uncancelled": {"text": with_echo, "wer": round(word_errors(BECKETT, with_echo).rate, 3)}}
    if args.json:
        for name, r in res.items():
            print(json.dumps({"package": name, **r}))
        print(json.dumps({**summary, "voxcli_stage_erle_db": round(stage_erle(case), 1)}))
        return
    for name, r in res.items():
        print(f"{name:15s} ERLE {r['erle_db']:5.1f} dB  CPU {r['cpu_us_per_10ms']:7.1f} us/10 ms  "
              f"near WER {r['near_wer']:.3f}  near/distortion {r['double_talk_near_loss_db']:5.1f} dB  "
              f"[{r['near_text']}]\n{'':15s} barge-in (reply stops {BARGE_IN_S} s into the user): "
              f"WER {r['barge_in_wer']:.3f} [{r['barge_in_text']}]")
    for name, r in summary.items():
        print(f"{name:15s} WER {r['wer']:.3f} [{r['text']}]")
    print(f"voxcli stage    ERLE {stage_erle(case):5.1f} dB  (EchoCanceller: reference tapped at "
          f"{int(case['far_rate'])} Hz, resampled, placed by stamps with 2 ms jitter; pywebrtc-audio)")


def stage_erle(case: dict[str, np.ndarray]) -> float:
    """voxcli's own stage (pywebrtc-audio underneath) run as the device callbacks would (`aec_room.replay`)."""
    from voxcli.audio.aec import EchoCanceller
    from voxcli.audio.aec_ref import ReferenceTimeline
    from voxcli.audio.aec_room import replay

    c = EchoCanceller(SR, reference=ReferenceTimeline(SR, clock=lambda: 0.0))
    out = replay(c, case["far"], int(case["far_rate"]), case["mic_echo"])
    s = slice(2 * SR, int(NEAR_AT_S * SR))
    return erle_db(case["echo"][s], out[s])


if __name__ == "__main__":
    main()
