#!/usr/bin/env python3
"""Is normalized text heard as the words it should be? Synthesize each case, transcribe it, score the words.

    python benchmarks/bench_normalize.py                      # every case of the table, WER per category
    python benchmarks/bench_normalize.py --baseline espeak    # also espeak-ng reading the raw text itself
    python benchmarks/bench_normalize.py --baseline old.py    # also another normalize.py (e.g. git show HEAD:...)
    python benchmarks/bench_normalize.py --every 4 --json     # a quarter of the table, one JSON line per case
    python benchmarks/bench_normalize.py --repeat 3           # three renditions of each case

The cases are the table of tests/tts/test_normalize_table.py (written text ->
the words a reader says). Each written text is spoken by voxcli's default
voice through the library's streaming path (`Voice.stream`: chunker,
normalizer, Piper), resampled to 16 kHz and transcribed by voxcli's own ASR
(the default model and VAD, `voxcli.asr.batch.transcribe_audio`). The score
is the word error rate of that transcript against the expected words, with
`voxcli.bench.wer` (both sides normalized the same way, so "$3.50" heard as
digits and "three dollars and fifty cents" are the same words). The WER
includes the recognizer's own errors: the baseline run on the same cases
says how much of it is the normalizer's.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SR = 16000
#: Scoring only: the recognizer writes "PM" as "p.m.", "p. M." or "p m"; one spelling on both sides.
_AMPM = re.compile(r"\b([ap])\.?\s?m\b\.?", re.IGNORECASE)
#: Scoring only: digits read one by one ("five five five, one two three") come back as "555-123"; when the
#: expected words read digits one by one, the heard digit runs are compared digit by digit too.
_DIGIT_WORDS = re.compile(r"\b(?:zero|one|two|three|four|five|six|seven|eight|nine)(?:,? (?:zero|one|two|three|four|five|"
                          r"six|seven|eight|nine)\b){2,}")
_DIGIT_RUN = re.compile(r"\d(?:[\s.,()-]*\d){2,}")


def load_cases() -> list[tuple[str, str, str]]:
    """(category, written, spoken) from the table test."""
    path = ROOT / "tests" / "tts" / "test_normalize_table.py"
    spec = importlib.util.spec_from_file_location("normalize_table", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return list(module.CASES)


def load_models() -> tuple[Any, Any, Any]:
    """The default voice, ASR model and VAD, as the library loads them."""
    import voxcli
    from voxcli.asr.models import load_asr

    asr, vad = load_asr()
    return voxcli.load_voice(), asr, vad


def transcribe(asr: Any, vad: Any, audio: np.ndarray, rate: int) -> str:
    from voxcli.asr.batch import transcribe_audio
    from voxcli.audio.pcm import resample

    return " ".join(u.text for u in transcribe_audio(asr, vad, resample(audio, rate, SR)))


def streamed(voice: Any) -> Callable[[str], np.ndarray]:
    """Written text -> audio as `speak` makes it (chunker + normalizer + Piper, streamed)."""
    def say(text: str) -> np.ndarray:
        parts = [c.audio for c in voice.stream(text) if c.audio.size]
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)
    return say


def baseline(voice: Any, which: str) -> Callable[[str], np.ndarray]:
    """"espeak": the raw text to espeak-ng (only unspeakable characters and markup removed); else a normalize.py path."""
    from voxcli.tts.normalize import strip_markup, strip_unspeakable

    if which == "espeak":
        rewrite: Callable[[str], str] = lambda t: strip_markup(strip_unspeakable(t))  # noqa: E731
    else:
        spec = importlib.util.spec_from_file_location("baseline_normalize", which)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        rewrite = module.normalize_text
    return lambda text: voice.engine.synthesize(rewrite(text), normalize=False)


def score(expected: str, heard: str) -> Any:
    """voxcli.bench.wer.word_errors after folding the recognizer's spellings of AM/PM."""
    from voxcli.bench.wer import word_errors

    if _DIGIT_WORDS.search(expected):
        heard = _DIGIT_RUN.sub(lambda m: " ".join(ch for ch in m.group(0) if ch.isdigit()), heard)
    return word_errors(_AMPM.sub(r"\1m", expected), _AMPM.sub(r"\1m", heard))


def run(cases: list[tuple[str, str, str]], say: Callable[[str], np.ndarray], rate: int, asr: Any, vad: Any,
        emit: Callable[[dict], None] | None = None) -> dict[str, Any]:
    """WER over the cases and per category; the worst cases first."""
    from voxcli.bench.wer import WER

    per_cat: dict[str, WER] = defaultdict(lambda: WER(0, 0, 0, 0))
    rows = []
    for category, text, spoken in cases:
        heard = transcribe(asr, vad, say(text), rate)
        e = score(spoken, heard)
        per_cat[category] = per_cat[category] + e
        row = {"category": category, "text": text, "expected": spoken, "heard": heard,
               "errors": e.errors, "words": e.ref_words}
        rows.append(row)
        if emit:
            emit(row)
    total = sum(per_cat.values(), WER(0, 0, 0, 0))
    return {"wer": total.rate, "errors": total.errors, "words": total.ref_words, "cases": len(cases),
            "by_category": {c: round(w.rate, 4) for c, w in sorted(per_cat.items())},
            "worst": sorted(rows, key=lambda r: -r["errors"] / max(r["words"], 1))[:10]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--every", type=int, default=1, help="take every Nth case (1 = all)")
    ap.add_argument("--repeat", type=int, default=1, help="renditions per case (Piper's noise makes each differ)")
    ap.add_argument("--baseline", action="append", default=[], help='"espeak" or a path to a normalize.py')
    ap.add_argument("--json", action="store_true", help="one JSON line per case, then one per summary")
    args = ap.parse_args(argv)

    cases = load_cases()[:: max(args.every, 1)] * max(args.repeat, 1)
    t0 = time.perf_counter()
    voice, asr, vad = load_models()
    emit = (lambda row: print(json.dumps(row), flush=True)) if args.json else None
    runs = {"voxcli": streamed(voice)} | {f"baseline:{b}": baseline(voice, b) for b in args.baseline}
    for name, say in runs.items():
        result = run(cases, say, voice.sample_rate, asr, vad, emit)
        if args.json:
            print(json.dumps({"run": name} | {k: v for k, v in result.items() if k != "worst"}), flush=True)
            continue
        print(f"{name}: WER {100 * result['wer']:.1f} % ({result['errors']} errors / {result['words']} words, "
              f"{result['cases']} cases)")
        for category, rate in result["by_category"].items():
            print(f"  {category:22} {100 * rate:5.1f} %")
        print("  worst:")
        for r in result["worst"][:5]:
            print(f"    {r['text']!r}: expected {r['expected']!r}, heard {r['heard']!r}")
    print(f"({time.perf_counter() - t0:.0f} s; voice {voice.name}, 2 shared cores)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
