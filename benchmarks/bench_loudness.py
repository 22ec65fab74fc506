#!/usr/bin/env python3
"""Level jumps between sentences and chunks: loudness of each sentence of a long paragraph, streamed vs. whole.

    python benchmarks/bench_loudness.py             # default voice, 3 renditions of a 12-sentence paragraph
    python benchmarks/bench_loudness.py --runs 5 --json

Streamed: the paragraph through `Voice.stream` as `speak` does (the chunker
cuts the first sentence after a few words; each chunk is prepared and decoded
in blocks), regrouped into sentences by the chunks' text. Whole: each
sentence synthesized on its own in one decode (`Voice.synthesize`, the
piper-tts way). Loudness is ITU-R BS.1770 (pyloudnorm, K-weighted, gated)
over each sentence, in LUFS; the spread is max - min over the sentences and
the jump is the largest difference between neighbouring sentences. For the
streamed run, "chunk joins" is the largest difference between the two
pieces of a sentence that the chunker cut (pieces >= 0.4 s only: the meter's
block). A jump a listener notices is about 1-2 dB between neighbours.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PARAGRAPH = (
    "The morning train was late again, and nobody on the platform seemed surprised.",
    "A woman in a red coat checked her watch twice.",
    "Why does this happen every Monday?",
    "The announcer apologized for the delay in a calm, practiced voice.",
    "Somewhere behind the station, a dog barked at the passing trucks.",
    "When the train finally arrived, the doors opened with a tired sigh.",
    "Everyone pushed forward at once!",
    "Inside, the carriage smelled of coffee, rain and old newspapers.",
    "A student fell asleep against the window before the first stop.",
    "The conductor walked slowly down the aisle, punching tickets and nodding to regulars.",
    "Outside, grey fields gave way to houses, then to the tall buildings of the city.",
    "By nine o'clock, the platform was empty again.",
)


def loudness(meter: Any, audio: np.ndarray) -> float:
    return float(meter.integrated_loudness(audio.astype(np.float64)))


def streamed_sentences(voice: Any, text: str) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """Sentences of the streamed audio, and for each the pieces the chunker cut it into."""
    pieces: list[tuple[str, list[np.ndarray]]] = []
    for c in voice.stream(text):
        if c.audio.size == 0:
            continue
        if c.text or not pieces:
            pieces.append((c.text, []))
        pieces[-1][1].append(c.audio)
    sentences: list[list[np.ndarray]] = [[]]
    for piece_text, blocks in pieces:
        sentences[-1].append(np.concatenate(blocks))
        if piece_text.rstrip().endswith((".", "!", "?")):
            sentences.append([])
    sentences = [s for s in sentences if s]
    return [np.concatenate(s) for s in sentences], sentences


def measure(voice: Any, meter: Any) -> dict[str, Any]:
    whole = [loudness(meter, voice.synthesize(s)) for s in PARAGRAPH]
    audio, parts = streamed_sentences(voice, " ".join(PARAGRAPH))
    if len(audio) != len(PARAGRAPH):
        raise SystemExit(f"streamed audio regrouped into {len(audio)} sentences, expected {len(PARAGRAPH)}")
    streamed = [loudness(meter, a) for a in audio]
    joins = [abs(loudness(meter, a) - loudness(meter, b)) for p in parts for a, b in zip(p, p[1:])
             if min(a.size, b.size) >= 0.4 * voice.sample_rate]
    return {"whole": _stats(whole), "streamed": _stats(streamed) | {"chunk_join_max_db": max(joins, default=0.0),
                                                                     "chunk_joins": len(joins)},
            "streamed_minus_whole_db": [round(s - w, 2) for s, w in zip(streamed, whole)]}


def _stats(lufs: list[float]) -> dict[str, float]:
    v = np.array(lufs)
    return {"mean_lufs": round(float(v.mean()), 2), "spread_db": round(float(v.max() - v.min()), 2),
            "std_db": round(float(v.std()), 2), "max_neighbour_jump_db": round(float(np.abs(np.diff(v)).max()), 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="renditions (Piper's noise makes each differ)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    try:
        import pyloudnorm
    except ImportError:
        print("bench_loudness: needs pyloudnorm (pip install pyloudnorm; benchmark only, not a dependency)",
              file=sys.stderr)
        return 2
    import voxcli

    t0 = time.perf_counter()
    voice = voxcli.load_voice()
    meter = pyloudnorm.Meter(voice.sample_rate)
    results = [measure(voice, meter) for _ in range(max(args.runs, 1))]
    for i, r in enumerate(results):
        if args.json:
            print(json.dumps({"run": i} | r), flush=True)
            continue
        w, s = r["whole"], r["streamed"]
        print(f"run {i}: spread whole {w['spread_db']:.2f} dB (std {w['std_db']:.2f}, max jump "
              f"{w['max_neighbour_jump_db']:.2f}) | streamed {s['spread_db']:.2f} dB (std {s['std_db']:.2f}, "
              f"max jump {s['max_neighbour_jump_db']:.2f}; {s['chunk_joins']} chunk joins, max "
              f"{s['chunk_join_max_db']:.2f} dB) | streamed - whole per sentence: {r['streamed_minus_whole_db']}")
    print(f"({time.perf_counter() - t0:.0f} s; voice {voice.name}, {len(PARAGRAPH)} sentences, 2 shared cores)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
