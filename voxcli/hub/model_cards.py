"""Model cards: the structured facts of a catalog model, read from its `card` table in catalog.toml.

Why structured: `voxcli models` used to carry WER and RTF inside free-text
descriptions, so nothing could check that every recognizer had them, and
`--json` users had to parse prose. A card is data: a test asserts that every
catalog ASR model has a complete one, `voxcli models --info NAME` prints it,
and `voxcli doctor` reads the WER to say which live-capable model is the most
accurate. The figures are measurements (dev set and machine named in
`DEV_SET` / `REFERENCE_MACHINE`), re-measured with `voxcli bench asr`; this
module only reads them. The catalog parses each card once, with its entry
(`hub/catalog.py` -> `ModelEntry.card`): a malformed card is one error line
when the catalog loads, and no caller validates it again.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Final


#: Where the `wer` of every card was measured (`voxcli bench asr`, all models in one run, 2026-12-01).
DEV_SET: Final = ("dev set v2 (benchmarks/bench_asr_devset.py): 17 human recordings, at least 5 speakers "
                  "(speech-samples, speech-clips-en, LibriVox, CMU PocketSphinx tests, JFK)")
ESPEAK_SET: Final = "8 espeak-ng voices reading 40 Harvard sentences (a synthesizer: harder than people)"
#: Where the `rtf` of every card was measured.
REFERENCE_MACHINE: Final = ("2 x86-64 cores shared with other jobs (pessimistic), --speed 1, "
                            "on the recordings")
TIMESTAMPS: Final = ("real", "estimated")
#: Card keys an ASR model must have (the catalog's `card` table), with their types.
ASR_FIELDS: Final[dict[str, type | tuple[type, ...]]] = {
    "languages": list, "params_m": (int, float), "precision": str, "timestamps": str,
    "wer": (int, float), "wer_words": int, "wer_espeak": (int, float), "wer_espeak_words": int,
    "rtf": (int, float), "streams": str,
}


@dataclass(frozen=True)
class ModelCard:
    """What `voxcli models --info NAME` shows and `--json` carries under "card"."""

    name: str
    kind: str
    runtime: str
    """Which runtime loads it ("moonshine": ONNX Runtime; "whisper-ct2": CTranslate2)."""
    languages: tuple[str, ...]
    params_m: float
    """Parameters, millions."""
    precision: str
    """Weights as shipped, and as run when different ("fp16 -> int8")."""
    size_bytes: int
    license: str
    timestamps: str
    """"real" (from the model: Whisper's cross-attention alignment) or "estimated" (spread over the audio)."""
    wer: float
    """Batch word error rate on `DEV_SET` (0.046 = 4.6 %)."""
    wer_words: int
    """Reference words of the dev set that `wer` was measured on."""
    wer_espeak: float
    """Batch WER on `ESPEAK_SET` (robustness to voices unlike the training data)."""
    wer_espeak_words: int
    rtf: float
    """Worker real-time factor streaming paced on `REFERENCE_MACHINE` (`voxcli doctor --measure` for yours)."""
    streams: str
    """"live", "live on a free CPU" or "files": what the figures above allow."""
    dev_set: str = DEV_SET
    reference_machine: str = REFERENCE_MACHINE

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["languages"] = list(self.languages)
        return d


def parse_card(name: str, kind: str, raw: Any, *, runtime: Any, license: str, size: int) -> ModelCard | None:
    """A catalog entry's card from its `card` table (None when it has none: non-ASR models need none).

    Called by the catalog parser, once per entry; ValueError naming every problem of a malformed card.
    """
    if raw is None:
        return None
    problems = card_problems(raw, runtime=runtime, license=license)
    if problems:
        raise ValueError(f"bad card: {'; '.join(problems)}")
    return ModelCard(
        name=name, kind=kind, runtime=str(runtime or raw.get("runtime", "")),
        languages=tuple(raw["languages"]), params_m=float(raw["params_m"]), precision=raw["precision"],
        size_bytes=size, license=license, timestamps=raw["timestamps"], wer=float(raw["wer"]),
        wer_words=int(raw["wer_words"]), wer_espeak=float(raw["wer_espeak"]),
        wer_espeak_words=int(raw["wer_espeak_words"]), rtf=float(raw["rtf"]), streams=raw["streams"],
    )


def card_problems(raw: Any, *, runtime: Any, license: str) -> list[str]:
    """What is missing or malformed in a `card` table ([] when complete)."""
    if not isinstance(raw, dict):
        return ["[card] is not a table"]
    problems = [f"{key} missing" for key in ASR_FIELDS if key not in raw]
    problems += [f"{key} should be {_type_name(t)}" for key, t in ASR_FIELDS.items()
                 if key in raw and (not isinstance(raw[key], t) or isinstance(raw[key], bool))]
    if not (runtime or raw.get("runtime")):
        problems.append("runtime missing (catalog `runtime` key)")
    if raw.get("timestamps") not in (None, *TIMESTAMPS):
        problems.append(f"timestamps must be one of {', '.join(TIMESTAMPS)}")
    if not license:
        problems.append("license missing")
    return problems


def _type_name(t: type | tuple[type, ...]) -> str:
    return " or ".join(x.__name__ for x in (t if isinstance(t, tuple) else (t,)))


def card_lines(card: ModelCard) -> list[tuple[str, str]]:
    """(label, value) rows of a card in reading order, for plain and rich views alike."""
    return [
        ("model", card.name), ("kind", card.kind), ("runtime", card.runtime),
        ("languages", ", ".join(card.languages)), ("parameters", f"{card.params_m:g} M"),
        ("precision", card.precision), ("size", f"{card.size_bytes / 1e6:.1f} MB"), ("licence", card.license),
        ("timestamps", card.timestamps),
        ("WER", f"{card.wer * 100:.1f} % on {card.wer_words} words ({card.dev_set})"),
        ("WER espeak", f"{card.wer_espeak * 100:.1f} % on {card.wer_espeak_words} words ({ESPEAK_SET})"),
        ("RTF", f"{card.rtf:.2f} worker, {card.reference_machine}"),
        ("streams", card.streams),
    ]
