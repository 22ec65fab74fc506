#!/usr/bin/env python3
"""Draft-checked final decode vs plain greedy, interleaved, on one long utterance (issue 16).

    python benchmarks/bench_draft.py                      # moonshine-base-en, two_cities' first 13 s
    python benchmarks/bench_draft.py -m moonshine-tiny-en --seconds 7.4 --repeat 7

Why: `MoonshineASR.generate(draft=)` must be faster than greedy with a good
draft (the caption) and cost about greedy with a wrong one (a garbage draft
once made every call carry 8 draft tokens for one token out: 1.5x greedy).
Each repeat times greedy, a good draft (the greedy text itself) and a garbage
draft in turn, so all three see the same load; the ratios are what to read.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GARBAGE = "banana orchestra telescope umbrella " * 12


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default="moonshine-base-en")
    ap.add_argument("--seconds", type=float, default=13.0, help="audio from the start of two_cities.wav")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from tests.conftest import _bundle
    from voxcli.asr.models import load_asr
    from voxcli.audio.files import read_audio

    asr, _ = load_asr(args.model, offline=True)
    audio = read_audio(str(_bundle("speech-samples").file("two_cities.wav")), rate=16000)[0]
    audio = audio[: int(args.seconds * 16000)]
    good = asr.text(audio)
    arms = {"greedy": None, "good draft": good, "garbage draft": GARBAGE}
    times: dict[str, list[float]] = {k: [] for k in arms}
    texts: dict[str, str] = {}
    load = os.getloadavg()[0]
    for _ in range(args.repeat):
        for name, draft in arms.items():
            t = time.perf_counter()
            texts[name] = asr.text(audio, draft=draft)
            times[name].append(time.perf_counter() - t)
    base = statistics.median(times["greedy"])
    print(f"{args.model}, {args.seconds:g} s, {args.repeat} interleaved repeats, load {load:.1f} -> "
          f"{os.getloadavg()[0]:.1f}")
    for name in arms:
        med = statistics.median(times[name])
        same = "same text" if texts[name] == texts["greedy"] else f"differs: {texts[name]!r}"
        print(f"{name:14} median {med:6.3f} s  ratio to greedy {med / base:5.2f}  ({same})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
