"""Speech of voices that are not voxcli's own: espeak-ng (the `espeakng-loader` wheel) reading Harvard sentences.

Why espeak-ng: it is a second TTS engine that is installed here from the
package index with many speakers (8 English accents x variants), so the dev
set is not one voice. It is a formant synthesizer, so it is harder than human
speech for some recognizers: its WER is reported apart from the recordings'.

Synthesis runs in a child process (`synthesize_voices`): libespeak-ng keeps
one global voice and one callback per process, and the Piper phonemizer in
the test process uses the same library.
"""
from __future__ import annotations

import ctypes
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

#: The IEEE 1969 "Harvard" sentences, lists 1-4 (phonetically balanced; widely used in speech tests).
HARVARD = [
    "The birch canoe slid on the smooth planks.", "Glue the sheet to the dark blue background.",
    "It's easy to tell the depth of a well.", "These days a chicken leg is a rare dish.",
    "Rice is often served in round bowls.", "The juice of lemons makes fine punch.",
    "The box was thrown beside the parked truck.", "The hogs were fed chopped corn and garbage.",
    "Four hours of steady work faced us.", "A large size in stockings is hard to sell.",
    "The boy was there when the sun rose.", "A rod is used to catch pink salmon.",
    "The source of the huge river is the clear spring.", "Kick the ball straight and follow through.",
    "Help the woman get back to her feet.", "A pot of tea helps to pass the evening.",
    "Smoky fires lack flame and heat.", "The soft cushion broke the man's fall.",
    "The salt breeze came across from the sea.", "The girl at the booth sold fifty bonds.",
    "The small pup gnawed a hole in the sock.", "The fish twisted and turned on the bent hook.",
    "Press the pants and sew a button on the vest.", "The swan dive was far short of perfect.",
    "The beauty of the view stunned the young boy.", "Two blue fish swam in the tank.",
    "Her purse was full of useless trash.", "The colt reared and threw the tall rider.",
    "It snowed, rained, and hailed the same morning.", "Read verse out loud for pleasure.",
    "Hoist the load to your left shoulder.", "Take the winding path to reach the lake.",
    "Note closely the size of the gas tank.", "Wipe the grease off his dirty face.",
    "Mend the coat before you go out.", "The wrist was badly strained and hung limp.",
    "The stray cat gave birth to kittens.", "The young girl gave no clear response.",
    "The meal was cooked before the bell rang.", "What joy there is in living.",
]
#: espeak-ng voice (accent + speaker variant) per speaker; each reads 5 sentences in turn.
VOICES = ["en-us+m1", "en-us+f2", "en+m3", "en+f4", "en-gb-scotland+m5", "en-029+m2",
          "en-gb-x-rp+f1", "en-us-nyc+m7"]
PER_VOICE = len(HARVARD) // len(VOICES)
RATE = 16000


def scripts() -> list[tuple[str, str]]:
    """(voice, text) of every espeak clip of the dev set."""
    return [(v, " ".join(HARVARD[i * PER_VOICE:(i + 1) * PER_VOICE])) for i, v in enumerate(VOICES)]


def _synth_all(jobs: list[tuple[str, str, str]]) -> None:
    """Write (voice, text, path) clips at 16 kHz; runs in the child process (one espeak_Initialize per process)."""
    import espeakng_loader
    import soundfile as sf
    import soxr

    lib = ctypes.CDLL(espeakng_loader.get_library_path())
    lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    rate = lib.espeak_Initialize(0x02, 0, espeakng_loader.get_data_path().encode(), 0x8000)
    if rate <= 0:
        raise RuntimeError("espeak_Initialize failed")
    pieces: list[np.ndarray] = []
    callback_t = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)

    def on_audio(wav, n, _events):  # noqa: ANN001 - ctypes callback
        if n > 0:
            pieces.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
        return 0

    cb = callback_t(on_audio)
    lib.espeak_SetSynthCallback(cb)
    lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    lib.espeak_Synth.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                 ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
    for voice, text, path in jobs:
        if lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise RuntimeError(f"espeak-ng has no voice {voice!r}")
        pieces.clear()
        raw = text.encode("utf-8") + b"\0"
        lib.espeak_Synth(raw, len(raw), 0, 1, 0, 1, None, None)  # POS_CHARACTER, espeakCHARS_UTF8
        lib.espeak_Synchronize()
        audio = np.concatenate(pieces).astype(np.float32) / 32768.0
        sf.write(path, soxr.resample(audio, rate, RATE).astype(np.float32), RATE, subtype="PCM_16")


def synthesize_voices(out_dir: Path) -> list[tuple[str, Path, str]]:
    """Write every espeak clip (wav + txt) once into out_dir; (name, wav path, reference) per clip."""
    import soundfile as sf

    out_dir.mkdir(parents=True, exist_ok=True)
    items = [(f"espeak-{v.replace('+', '-')}", out_dir / f"espeak-{v.replace('+', '-')}.wav", t) for v, t in scripts()]
    if not all(p.exists() for _, p, _ in items):
        code = ("import sys, json; sys.path.insert(0, sys.argv[1]); "
                "from tests.whisper.espeak_voices import _synth_all; _synth_all(json.loads(sys.argv[2]))")
        jobs = [(v, t, str(p)) for (v, t), (_, p, _) in zip(scripts(), items)]
        root = str(Path(__file__).resolve().parents[2])
        subprocess.run([sys.executable, "-c", code, root, json.dumps(jobs)], check=True, timeout=300)
    for _, p, t in items:
        p.with_suffix(".txt").write_text(t + "\n", encoding="utf-8")
        assert sf.info(str(p)).frames > 0
    return items
