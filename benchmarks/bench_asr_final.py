#!/usr/bin/env python3
"""End of speech -> ASR final: speculative finalization against the serial final decode, in one run.

    python benchmarks/bench_asr_final.py            # 10 spoken questions + beckett, real time, both modes
    python benchmarks/bench_asr_final.py --json     # one JSON line per utterance + a summary

Each item (a question spoken by voxcli's own voice, or the beckett recording)
is fed at real time in 32 ms blocks, as a microphone would, with 1.2 s of
silence after it, through each mode in turn (the modes alternate item by
item, so all see the same load): `serial` (speculative=False, the final
decode starts after the endpoint hold, as before #13), `speculative` (it
starts at silence onset and runs during the hold) and
`speculative_hold_from_speech` (also the hold counted from the last speech
sample instead of the VAD's first silence frame). For every
utterance: the wall time from its last speech sample (the energy end found by
`last_speech_sample`, the same sample for both modes) to its final caption,
and from the VAD's first silence frame (the old stamp) to it. Also checked:
all modes give the same final text. Timings on a shared machine are noisy:
read the ratio and the difference to the hold, taken in one run.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SR = 16000
BLOCK = 512  # 32 ms, a microphone callback
QUESTIONS = [
    "What is the capital of France?", "How many legs does a spider have?", "Can you tell me a joke about cats?",
    "What time is it in Tokyo right now?", "Why is the sky blue?", "Please recommend a good book to read.",
    "How far away is the moon?", "What should I cook for dinner tonight?", "Who wrote the play Romeo and Juliet?",
    "Tell me something interesting about octopuses.",
]


def items(n_questions: int) -> list[tuple[str, np.ndarray]]:
    import voxcli
    from voxcli.audio.files import read_audio
    from voxcli.audio.pcm import resample
    from voxcli.hub.resolve import resolve_model

    voice = voxcli.load_voice()
    out = []
    for q in QUESTIONS[:n_questions]:
        a = np.concatenate([c.audio for c in voice.stream(q) if c.kind == "audio"])
        out.append((q, resample(a, voice.sample_rate, SR)))
    out.append(("beckett.wav", read_audio(resolve_model("speech-samples", kind="data").file("beckett.wav"), SR)[0]))
    return [(name, np.concatenate([np.zeros(SR // 2, np.float32), a, np.zeros(int(1.2 * SR), np.float32)]))
            for name, a in out]


def ends(vad, audio: np.ndarray, endpoint_ms: float) -> list[tuple[int, int]]:
    """(last speech sample, VAD silence onset) of each utterance, offline."""
    from voxcli.asr.endpointer import Endpointer, VADConfig, last_speech_sample

    vad.reset()
    ep, out = Endpointer(VADConfig(endpoint_ms=endpoint_ms)), []
    for p in vad.probs(audio):
        ev = ep.feed(float(p))
        if ev is not None and ev.kind == "end":
            out.append((last_speech_sample(audio, 0, ev.speech_end or ev.sample, ev.sample), ev.sample))
    return out


MODES = {"serial": {"speculative": False}, "speculative": {}, "speculative_hold_from_speech": {"hold_from": "speech"}}


def run_one(model, vad, audio: np.ndarray, endpoint_ms: float, cls=None, **kw) -> tuple[list[float], list[str]]:
    """Feed at real time; wall seconds (since the first sample) at which each final caption arrived, and texts."""
    from voxcli.asr.endpointer import VADConfig
    from voxcli.asr.streamer import ASRStreamer

    s = (cls or ASRStreamer)(model, vad, vad_config=VADConfig(endpoint_ms=endpoint_ms), **kw)
    finals: list[float] = []
    texts: list[str] = []
    t0 = time.monotonic()

    def read() -> None:
        for cap in s.captions:
            if cap.is_final and cap.stable:
                finals.append(time.monotonic() - t0)
                texts.append(cap.stable)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    for i in range(0, audio.size, BLOCK):
        delay = t0 + (i + BLOCK) / SR - time.monotonic()  # a block exists once its last sample is captured
        if delay > 0:
            time.sleep(delay)
        s.send(audio[i : i + BLOCK], block=False)
    s.finish()
    reader.join(10)
    return finals, texts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=10)
    ap.add_argument("--endpoint-ms", type=float, default=None, help="the hold (default: the config's)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from voxcli.asr.models import load_asr
    from voxcli.config import DEFAULT_ENDPOINT_MS

    endpoint_ms = args.endpoint_ms or DEFAULT_ENDPOINT_MS
    model, vad = load_asr()
    summary = bench(model, vad, items(args.questions), endpoint_ms, MODES,
                    on_row=(lambda r: print(json.dumps(r))) if args.json else None)
    if args.json:
        print(json.dumps(summary))
    else:
        for k, v in summary.items():
            print(f"{k:50s} {v}")
    return 0 if summary["same_text"] else 1


def bench(model, vad, items_, endpoint_ms: float, modes: dict[str, dict], on_row=None) -> dict:
    """Run every item through every mode in turn; the summary of p50s per mode."""
    from voxcli.asr.endpointer import FRAME

    rows: dict[str, list[dict]] = {m: [] for m in modes}
    same = True
    for name, audio in items_:
        truth = ends(vad, audio, endpoint_ms)
        texts = {}
        for mode, kw in modes.items():
            finals, texts[mode] = run_one(model, vad, audio, endpoint_ms, **kw)
            for (speech_end, onset), t in zip(truth, finals):
                row = {"item": name, "mode": mode, "eos_to_final_ms": round((t - speech_end / SR) * 1000, 1),
                       "vad_silence_to_final_ms": round((t - onset / SR) * 1000, 1),
                       "vad_decay_ms": round((onset - speech_end) / SR * 1000, 1)}
                rows[mode].append(row)
                if on_row:
                    on_row(row)
        same &= len({tuple(t) for t in texts.values()}) == 1
    hold = FRAME * max(1, round(endpoint_ms * SR / 1000 / FRAME)) / SR * 1000
    first = next(iter(modes))
    summary = {"event": "bench_asr_final", "hold_ms": round(hold, 1), "utterances": len(rows[first]),
               "same_text": same, "vad_decay_p50_ms": _p50([r["vad_decay_ms"] for r in rows[first]])}
    for mode in modes:
        summary[f"{mode}_eos_to_final_p50_ms"] = _p50([r["eos_to_final_ms"] for r in rows[mode]])
        summary[f"{mode}_vad_silence_to_final_p50_ms"] = _p50([r["vad_silence_to_final_ms"] for r in rows[mode]])
    return summary


def _p50(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 1) if xs else None


if __name__ == "__main__":
    raise SystemExit(main())
