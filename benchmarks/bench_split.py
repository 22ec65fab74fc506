"""Issue 15: the z_p split and whole sentences for known text, against piper-tts (and streaming-vits).

One process, one interleaved run (the machine is shared: every figure that
matters is a ratio between systems measured in the same rounds), same voice
file (en_US-joe-medium), 2 onnxruntime threads everywhere:

- voxcli:   `Voice.stream(text)` (known text: whole sentences, flow + decoder in blocks)
- cut:      voxcli's incremental path on the same text (`send` + `finish`: the short first piece,
            what `speak "text"` did before issue 15), for contrast
- piper:    piper-tts 1.8 `PiperVoice.synthesize` (one whole sentence per chunk), its session built
            with voxcli's session policy (piper-tts's own default spins its threads, which bills CPU
            for waiting: `--piper-defaults` measures that instead)
- svits:    streaming-vits 0.4.2 as shipped (profile defaults, 2 threads), if importable; it needs an
            espeak-ng binary or piper-phonemize, neither installed here, so it is given voxcli's
            phonemizer (same espeak-ng library as piper-tts). `--svits-path DIR` adds DIR to sys.path.

Measured:
1. first audio (ms from the call to the first audio chunk), p50 per text: a 16-word and a 45-word
   first sentence (each followed by a short second one);
2. audio length, noise scales 0 (deterministic): streamed vs piper's whole-sentence synthesis;
3. total process CPU per text (all threads), voxcli / piper;
4. intelligibility: Whisper tiny.en (CTranslate2, voxcli's whisper-tiny-en) WER over 15 held-out
   Harvard sentences, `--renditions` renditions each with the voices' own noise, and once with noise
   scales 0 (the noise lottery moves the first figure by +-1.5 points between runs of 3 renditions;
   with scales 0 the pipelines differ only in how they cut and decode).

`vx-whole` is voxcli's `Voice.synthesize` (`--no-stream`): streamed CPU / vx-whole CPU is what the
blocks cost, vx-whole / piper what the rest of the pipeline costs.

    python benchmarks/bench_split.py --runs 9 --renditions 2 [--svits-path DIR] [--json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

T16 = "The morning train was late again, so we walked to the office along the quiet river. We were fine."
T45 = ("When the committee finally met on Thursday afternoon, the members argued for hours about the budget, "
       "the schedule and the new building, and nobody was willing to give an inch until the chairman reminded "
       "them that the deadline had already passed twice. Then they voted.")
PARAGRAPH = ("The morning train was late again. When the committee finally met, nobody agreed about the new "
             "building or its budget. We went home early and cooked a long dinner for our friends.")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.whisper.espeak_voices import HARVARD as _LISTS  # noqa: E402 - the repo's one copy

HARVARD = _LISTS[:15]
"""Held out for the TTS: no TTS test or tuning uses them (the ASR dev set reads them with espeak voices)."""


def voxcli_systems(voice: Any) -> dict[str, Callable[[str], tuple[float, np.ndarray]]]:
    from voxcli.tts.streamer import TTSStreamer

    def known(text: str) -> tuple[float, np.ndarray]:
        t0, first, parts = time.perf_counter(), None, []
        for c in voice.stream(text):
            if c.kind == "audio":
                first = first if first is not None else time.perf_counter() - t0
                parts.append(c.audio)
        return first or float("nan"), np.concatenate(parts)

    def cut(text: str) -> tuple[float, np.ndarray]:
        t0, first, parts = time.perf_counter(), None, []
        s = TTSStreamer(voice)
        s.send(text)
        s.finish()
        for c in s.output:
            if c.kind == "audio":
                first = first if first is not None else time.perf_counter() - t0
                parts.append(c.audio)
        s.join(5)
        return first or float("nan"), np.concatenate(parts)

    def whole(text: str) -> tuple[float, np.ndarray]:  # `--no-stream`: what the blocks must add up to
        t0 = time.perf_counter()
        audio = voice.synthesize(text)
        return time.perf_counter() - t0, audio

    return {"voxcli": known, "cut": cut, "vx-whole": whole}


def piper_system(onnx: Path, spin_defaults: bool, scales0: bool) -> Callable[[str], tuple[float, np.ndarray]]:
    from piper import PiperVoice, SynthesisConfig
    from piper.config import PiperConfig

    if spin_defaults:
        pv = PiperVoice.load(onnx)
    else:
        from voxcli.runtimes.onnx import session

        cfg = PiperConfig.from_dict(json.loads(Path(str(onnx) + ".json").read_text()))
        pv = PiperVoice(session=session(onnx, threads=2, cache=False), config=cfg)
    syn = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0) if scales0 else None

    def run(text: str) -> tuple[float, np.ndarray]:
        t0, first, parts = time.perf_counter(), None, []
        for c in pv.synthesize(text, syn):
            first = first if first is not None else time.perf_counter() - t0
            parts.append(c.audio_float_array)
        return first or float("nan"), np.concatenate(parts)

    return run


def svits_system(onnx: Path, workdir: Path, scales0: bool) -> Callable[[str], tuple[float, np.ndarray]] | None:
    try:
        import streaming_vits.phonemize as phon
        from streaming_vits import StreamingTTS
    except ImportError:
        return None
    from voxcli.runtimes.piper.phonemize import EspeakPhonemizer, phonemes_to_ids
    from voxcli.runtimes.piper.voice import VoiceConfig

    vc = VoiceConfig.read(Path(str(onnx) + ".json"))
    espeak = EspeakPhonemizer(vc.espeak_voice, vc.vowel_clusters)

    class Ids:  # streaming-vits's phonemizer interface: text -> (ids, unknown)
        def ids(self, text: str) -> tuple[list[int], int]:
            phonemes: list[str] = []
            for s in espeak.phonemize(text):
                phonemes += list(s.phonemes) + [" "]
            return phonemes_to_ids(phonemes[:-1], vc.phoneme_id_map), 0

    phon.build = lambda *a, **k: Ids()
    workdir.mkdir(parents=True, exist_ok=True)
    # Its split goes to `cache` and its profile is given (the shipped defaults): otherwise it writes
    # next to the (resolved) model, i.e. into the installed voice package.
    from streaming_vits import Profile

    tts = StreamingTTS(onnx, threads=2, verbose=False, cache=workdir / "split", profile=Profile(threads=2))
    scales = tts.scales(noise=0.0, noise_w=0.0) if scales0 else None

    def run(text: str) -> tuple[float, np.ndarray]:
        t0, first, parts = time.perf_counter(), None, []
        for c in tts.stream(text, scales=scales):
            first = first if first is not None else time.perf_counter() - t0
            parts.append(np.asarray(c.audio, np.float32).reshape(-1))
        return first or float("nan"), np.concatenate(parts)

    return run


def timing_rounds(systems: dict[str, Callable], runs: int) -> dict[str, dict[str, list[float]]]:
    """{text: {system: [first audio ms]}} and CPU s per run, interleaved round by round."""
    out: dict[str, dict[str, list[float]]] = {}
    for _ in range(runs):
        for label, text in (("16w", T16), ("45w", T45)):
            for name, run in systems.items():
                cpu0 = time.process_time()
                first, _audio = run(text)
                cpu = time.process_time() - cpu0
                out.setdefault(label, {}).setdefault(name, []).append(first * 1000.0)
                out.setdefault(label + " cpu", {}).setdefault(name, []).append(cpu)
    return out


def lengths(systems0: dict[str, Callable], sr: int) -> dict[str, dict[str, float]]:
    """Audio seconds per text with noise scales 0 (one run: deterministic)."""
    return {label: {name: run(text)[1].size / sr for name, run in systems0.items()}
            for label, text in (("16w", T16), ("45w", T45), ("paragraph", PARAGRAPH))}


def intelligibility(systems: dict[str, Callable], renditions: int, sr: int) -> dict[str, float]:
    from voxcli.asr.models import load_asr
    from voxcli.audio.pcm import resample
    from voxcli.bench.wer import WER, word_errors

    asr, _vad = load_asr("whisper-tiny-en", threads=2)
    totals: dict[str, WER] = {}
    for _ in range(renditions):
        for sentence in HARVARD:
            for name, run in systems.items():
                audio = resample(run(sentence)[1], sr, 16000)
                said = " ".join(w.text for w in asr.transcribe(audio, None))
                e = word_errors(sentence, said)
                totals[name] = totals[name] + e if name in totals else e
    return {name: 100.0 * w.rate for name, w in totals.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--renditions", type=int, default=2)
    ap.add_argument("--svits-path", type=Path, default=None)
    ap.add_argument("--piper-defaults", action="store_true", help="piper-tts's own session options (spinning)")
    ap.add_argument("--skip-wer", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.svits_path:
        sys.path.insert(0, str(args.svits_path))
    from voxcli.tts.streamer import load_voice

    voice = load_voice("piper-joe-medium", threads=2)
    onnx = _onnx_path()
    sr = voice.sample_rate
    systems = {**voxcli_systems(voice), "piper": piper_system(onnx, args.piper_defaults, False)}
    svits = svits_system(onnx, Path("/tmp/voxcli-bench-svits"), False)
    if svits is not None:
        systems["svits"] = svits
    for run in systems.values():  # warm every session once
        run("Hello there, warming up.")
    report: dict[str, Any] = {"timing": timing_rounds(systems, args.runs)}
    deterministic = _deterministic(voice)
    systems0 = {**voxcli_systems(deterministic), "piper": piper_system(onnx, args.piper_defaults, True)}
    report["audio_s_scales0"] = lengths(systems0, sr)
    if not args.skip_wer:
        report["wer_pct"] = intelligibility({k: systems[k] for k in ("voxcli", "cut", "piper")}, args.renditions, sr)
        report["wer_pct_scales0"] = intelligibility({k: systems0[k] for k in ("voxcli", "cut", "piper")}, 1, sr)
    _print(report, args.json)
    return 0


def _onnx_path() -> Path:
    from voxcli.hub.resolve import resolve_model

    return next(iter(resolve_model("piper-joe-medium", kind="tts").find(".onnx")))


def _deterministic(voice: Any) -> Any:
    import copy

    from voxcli.tts.streamer import Voice

    engine = copy.copy(voice.engine)  # sessions shared
    engine.scales = np.array([0.0, engine.scales[1], 0.0], np.float32)
    return Voice(engine, voice.name)


def _print(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=1))
        return
    for label, by in report["timing"].items():  # noqa: B007 - (empty with --runs 0)
        med = {k: statistics.median(v) for k, v in by.items()}
        unit = "s cpu" if label.endswith("cpu") else "ms first audio p50"
        ratios = "  ".join(f"{k}/piper {med[k] / med['piper']:.2f}" for k in med if k != "piper")
        print(f"{label:9s} {unit}: " + "  ".join(f"{k} {v:.3f}" if 'cpu' in label else f"{k} {v:.0f}"
                                               for k, v in med.items()) + f"   | {ratios}")
    for label, by in report["audio_s_scales0"].items():
        print(f"audio s (scales 0) {label:9s}: " + "  ".join(f"{k} {v:.3f} ({100 * (v / by['piper'] - 1):+.2f} %)"
                                                            for k, v in by.items()))
    for key, what in (("wer_pct", "voices' noise"), ("wer_pct_scales0", "noise scales 0, one rendition")):
        if key in report:
            print(f"WER % whisper-tiny-en ({what}): " + "  ".join(f"{k} {v:.2f}" for k, v in report[key].items()))


if __name__ == "__main__":
    sys.exit(main())
