"""The ASR dev set (v2): 17 human recordings (at least 5 speakers, 270 words) and 8 espeak-ng voices (313 words).

Sources (none is voxcli's own voice; references are the .txt beside each clip):
- speech-samples (cache, moonshine-voice wheel, MIT): Beckett, A Tale of Two Cities.
- speech-clips-en (cache, pytest-audioeval wheel, MIT): counting, hello world, quick brown fox.
- tests/whisper/devset/ (in the repo, 16 kHz FLAC, 0.9 MB): LibriVox "Sense and Sensibility"
  read by a volunteer (public domain), the "cards" and "go forward" test utterances of
  CMU PocketSphinx (BSD-2, from the pocketsphinx 5.1.1 sdist), and JFK's "ask not"
  (public domain; from the pywhispercpp 1.5.1 sdist, whisper.cpp's samples/jfk.wav).
- espeak-ng voices reading Harvard sentences (`espeak_voices`), synthesized at run time.

Group "recordings" is human speech; group "espeak" is the formant synthesizer,
scored apart because its errors say more about robustness than about users.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent / "devset"
CLIP_REFS = {
    "counting": "One two three four five six seven eight nine ten.",
    "hello_world": "Hello world.",
    "quick_brown_fox": "The quick brown fox jumps over the lazy dog.",
}


@dataclass(frozen=True)
class DevClip:
    name: str
    path: Path
    reference: str
    group: str
    """"recordings" (human speech) or "espeak" (synthesized by espeak-ng)."""


def _cached(name: str, cache_root: Path):
    from voxcli.hub.cache import Cache
    from voxcli.hub.resolve import installed_bundle

    return installed_bundle(name, Cache(cache_root))


def recordings(cache_root: Path) -> list[DevClip]:
    """The human recordings that are here: the repo's clips always, the cached bundles when installed."""
    from tests.asr_checks import BECKETT_REF, TWO_CITIES_REF

    clips: list[DevClip] = []
    samples = _cached("speech-samples", cache_root)
    if samples is not None:
        clips += [DevClip("beckett", samples.file("beckett.wav"), BECKETT_REF, "recordings"),
                  DevClip("two_cities", samples.file("two_cities.wav"), TWO_CITIES_REF, "recordings")]
    extra = _cached("speech-clips-en", cache_root)
    if extra is not None:
        clips += [DevClip(n, extra.file(f"{n}.wav"), ref, "recordings") for n, ref in CLIP_REFS.items()]
    clips += [DevClip(p.stem, p, p.with_suffix(".txt").read_text(encoding="utf-8").strip(), "recordings")
              for p in sorted(HERE.glob("*.flac"))]
    return clips


def dev_clips(cache_root: Path, work_dir: Path) -> list[DevClip]:
    """Every clip of the dev set; the espeak ones are synthesized into work_dir once."""
    from tests.whisper.espeak_voices import synthesize_voices

    return recordings(cache_root) + [DevClip(n, p, ref, "espeak") for n, p, ref in synthesize_voices(work_dir)]


def export(clips: list[DevClip], out_dir: Path) -> list[Path]:
    """A directory `voxcli bench asr DIR/*.wav DIR/*.flac` reads: each clip linked, its .txt beside it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for c in clips:
        stem = c.name if c.name.startswith(c.group + "-") else f"{c.group}-{c.name}"  # the group leads the name
        dst = out_dir / f"{stem}{c.path.suffix}"
        if not dst.exists():
            os.symlink(c.path.resolve(), dst)
        dst.with_suffix(".txt").write_text(c.reference + "\n", encoding="utf-8")
        paths.append(dst)
    return paths
