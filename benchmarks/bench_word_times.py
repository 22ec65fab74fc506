#!/usr/bin/env python3
"""How far an ASR's word times are from the truth: TTS speech whose word times are known.

    python benchmarks/bench_word_times.py                       # moonshine-tiny-en and whisper-tiny-en
    python benchmarks/bench_word_times.py --models whisper-base --json

The truth: voxcli's own voice (Piper joe, whole sentences, noise scales 0)
reads the paragraphs below; its word times are the duration predictor's
(`voxcli.tts.words`, exact to one 11.6 ms frame). Each model transcribes the
16 kHz audio two ways: the whole paragraph as one buffer (`transcribe`), and
per VAD utterance as `voxcli transcribe` segments a file (times offset by the
utterance's start). Recognized words are paired with the written tokens they
spell (`voxcli.tts.word_pairs`: "$3.50" is one token), and for each pair the
error of the start and of the end is taken. Moonshine has no timestamps: its
times are estimated by character share of the buffer (`words_with_estimated_times`);
Whisper's come from cross-attention alignment.

Figures per model and mode: pairs matched / tokens, median and p90 of
|start error| and |end error| (ms), and the share of recognized words whose
midpoint falls inside the TTS token's span.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from voxcli.audio.pcm import resample  # noqa: E402
from voxcli.tts.word_pairs import pair, written_tokens  # noqa: E402

PARAGRAPHS = (
    "Dr. Smith paid $3.50 at 8:15 for a coffee. The morning train was late again, and nobody knew why.",
    "Our meeting moved to Tuesday at 10:30. Please bring the report, the budget and your ideas for next year.",
    "The river rose by two meters overnight. By noon the old bridge was closed, and the ferry ran every hour.",
    "She bought 3 kg of apples for $12 and walked home along Elm Street in the rain.",
    "In 1984 the small company had only five people. Today it employs more than two thousand engineers.",
    "Turn left at the second light, then keep going until you see a red door. That is where we live.",
    "The quick brown fox jumps over the lazy dog, while the cat watches from the warm kitchen window.",
    "Gov. Adams spoke for twenty minutes. Afterwards the questions were sharp, and the answers were short.",
)


def load_voice():  # type: ignore[no-untyped-def]
    from voxcli.tts.streamer import load_voice as load

    voice = load()
    engine = voice.engine
    engine.scales = np.array([0.0, engine.scales[1], 0.0], np.float32)
    return voice


def load_asr(name: str):  # type: ignore[no-untyped-def]
    from voxcli.asr.models import load_engine
    from voxcli.hub.resolve import resolve_model
    from voxcli.runtimes.silero_vad import SileroVAD

    vad = SileroVAD.load(resolve_model("silero-vad", kind="vad").file("silero_vad.onnx"))
    return load_engine(resolve_model(name, kind="asr"), threads=1), vad


def per_utterance(asr, vad, audio: np.ndarray) -> list:  # type: ignore[no-untyped-def]
    """Words of each VAD utterance, as `voxcli transcribe` cuts a file, on the recording's clock."""
    from voxcli.asr.batch import _Segmenter
    from voxcli.asr.endpointer import VADConfig
    from voxcli.events import Word

    seg = _Segmenter(vad, VADConfig(), 20 * 16000)
    out = []
    for a, _, piece in seg.feed(audio) + seg.finish():
        out += [Word(w.text, w.start + a / 16000, w.end + a / 16000, w.prob) for w in asr.transcribe(piece)]
    return out


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.abs(values), q) * 1000) if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["moonshine-tiny-en", "whisper-tiny-en"])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from voxcli.tts.words import synthesize

    voice = load_voice()
    spoken = [(text, *synthesize(voice, text)) for text in PARAGRAPHS]
    for name in args.models:
        asr, vad = load_asr(name)
        for mode in ("buffer", "vad"):
            pairs, tokens = [], 0
            for text, audio, words in spoken:
                a16 = resample(audio, voice.sample_rate, 16000)
                heard = asr.transcribe(a16) if mode == "buffer" else per_utterance(asr, vad, a16)
                pairs += pair(words, text, heard)
                tokens += len(written_tokens(words, text))
            starts, ends = [p.start_error for p in pairs], [p.end_error for p in pairs]
            inside = np.mean([p.start <= (p.heard.start + p.heard.end) / 2 <= p.end for p in pairs])
            row = {"model": name, "mode": mode, "pairs": len(pairs), "tokens": tokens,
                   "start_p50_ms": round(pct(starts, 50)), "start_p90_ms": round(pct(starts, 90)),
                   "end_p50_ms": round(pct(ends, 50)), "end_p90_ms": round(pct(ends, 90)),
                   "mid_inside": round(float(inside), 3)}
            if args.json:
                print(json.dumps(row))
            else:
                print(f"{name:18s} {mode:6s} {len(pairs):3d}/{tokens} words  start |err| p50 {row['start_p50_ms']:4d} ms"
                      f" p90 {row['start_p90_ms']:4d} ms  end |err| p50 {row['end_p50_ms']:4d} ms"
                      f" p90 {row['end_p90_ms']:4d} ms  midpoint inside {row['mid_inside']:.0%}")


if __name__ == "__main__":
    main()
