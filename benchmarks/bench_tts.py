"""Warm time-to-first-audio of streaming TTS vs batch synthesis vs piper-tts's own paths.

What it measures, in one run, on one three-sentence paragraph and the same
voice file, interleaving the methods so CPU contention hits all of them alike:

- stream:     voxcli TTSStreamer (send, finish) -> first audio chunk ready
- no-stream:  voxcli Voice.synthesize (the `--no-stream` path) -> all audio
- piper-api:  piper-tts PiperVoice.synthesize -> first sentence chunk
- piper-raw:  a warm `piper --output-raw` process, one line on stdin -> first PCM byte

plus the streamer's RTF and underruns against a simulated real-time player.
Targets (2-core CPU, issue 3): stream TTFA p50 <= 60 ms and <= 0.15x the
batch synthesis time; RTF <= 0.15; 0 underruns.

    python benchmarks/bench_tts.py --runs 10 [--json] [--skip-piper]
"""
from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import subprocess
import sys
import time

from voxcli.bench.metrics import summarize
from voxcli.tts.streamer import TTSStreamer, load_voice

PARAGRAPH = (
    "The quick brown fox jumps over the lazy dog near the river bank. "
    "Streaming speech begins before the whole paragraph is synthesized, which keeps the first audio fast. "
    "This is the third and final sentence of the benchmark paragraph."
)


def run_stream(voice, text: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    s = TTSStreamer(voice)
    s.send(text)
    s.finish()
    final = [c for c in s.output][-1]
    st = final.stats
    assert st is not None and final.kind == "final"
    return {"ttfa": st.ttfa_s or float("nan"), "rtf": st.rtf, "underruns": st.underruns,
            "total": st.total_s, "audio": st.audio_s, "chunks": st.chunks}


def run_batch(voice, text: str) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    voice.synthesize(text)
    return time.perf_counter() - t


def run_piper_api(pv, text: str) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    it = iter(pv.synthesize(text))
    next(it)
    first = time.perf_counter() - t
    for _ in it:
        pass
    return first, time.perf_counter() - t


class PiperRaw:
    """A warm `piper --output-raw` process: one line in, time to the first PCM byte out."""

    def __init__(self, model: str, config: str) -> None:
        exe = shutil.which("piper")
        cmd = [exe] if exe else [sys.executable, "-m", "piper"]
        self.proc = subprocess.Popen([*cmd, "-m", model, "-c", config, "--output-raw"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
        self.fd = self.proc.stdout.fileno()  # type: ignore[union-attr]

    def run(self, text: str, audio_s: float) -> float:
        t = time.perf_counter()
        self.proc.stdin.write((text + "\n").encode())  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        select.select([self.fd], [], [], 120)
        first = time.perf_counter() - t
        # Drain this line's audio: piper writes sentence by sentence, so wait for a long idle gap.
        while True:
            r, _, _ = select.select([self.fd], [], [], 2.0)
            if not r or not os.read(self.fd, 1 << 16):
                break
        return first

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        while os.read(self.fd, 1 << 16):  # let it finish writing, then exit on EOF
            pass
        self.proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    ap.add_argument("--skip-piper", action="store_true", help="do not run piper-tts's paths")
    args = ap.parse_args()

    voice = load_voice()
    onnx = str(voice.engine.onnx_path) if hasattr(voice.engine, "onnx_path") else None
    from voxcli.hub.resolve import resolve_model

    bundle = resolve_model(None, kind="tts")
    onnx = onnx or str(bundle.find(".onnx")[0])
    config = onnx + ".json"
    pv = raw = None
    if not args.skip_piper:
        from piper import PiperVoice as RefVoice

        pv = RefVoice.load(onnx, config)
        raw = PiperRaw(onnx, config)

    for _ in range(2):  # warm-up: sessions, caches, espeak
        run_stream(voice, PARAGRAPH)
        run_batch(voice, PARAGRAPH)
        if pv is not None:
            run_piper_api(pv, PARAGRAPH)
            raw.run(PARAGRAPH, 8.0)  # type: ignore[union-attr]

    stream, batch, api_first, api_total, raw_first = [], [], [], [], []
    for _ in range(args.runs):
        stream.append(run_stream(voice, PARAGRAPH))
        batch.append(run_batch(voice, PARAGRAPH))
        if pv is not None:
            f, t = run_piper_api(pv, PARAGRAPH)
            api_first.append(f)
            api_total.append(t)
            raw_first.append(raw.run(PARAGRAPH, stream[-1]["audio"]))  # type: ignore[union-attr]
    if raw is not None:
        raw.close()

    ttfa = summarize([r["ttfa"] for r in stream])
    no_stream = summarize(batch)
    result = {
        "paragraph_chars": len(PARAGRAPH),
        "runs": args.runs,
        "cpu_count": os.cpu_count(),
        "load_avg_1m": os.getloadavg()[0],
        "stream_ttfa_ms": ttfa.to_dict(1000),
        "stream_rtf_p50": round(summarize([r["rtf"] for r in stream]).p50, 3),
        "stream_underruns_total": int(sum(r["underruns"] for r in stream)),
        "stream_chunks_p50": summarize([r["chunks"] for r in stream]).p50,
        "no_stream_ttfa_ms": no_stream.to_dict(1000),
        "ratio_stream_vs_no_stream_p50": round(ttfa.p50 / no_stream.p50, 3),
    }
    if api_first:
        api = summarize(api_first)
        rawf = summarize(raw_first)
        result.update({
            "piper_api_first_chunk_ms": api.to_dict(1000),
            "piper_api_total_ms": summarize(api_total).to_dict(1000),
            "piper_raw_first_byte_ms": rawf.to_dict(1000),
            "ratio_stream_vs_piper_api_p50": round(ttfa.p50 / api.p50, 3),
            "ratio_stream_vs_piper_raw_p50": round(ttfa.p50 / rawf.p50, 3),
        })
    targets = {
        "ttfa_p50_le_60ms": ttfa.p50 <= 0.060,
        "ttfa_le_0.15x_batch": ttfa.p50 <= 0.15 * no_stream.p50,
        "rtf_le_0.15": result["stream_rtf_p50"] <= 0.15,
        "zero_underruns": result["stream_underruns_total"] == 0,
    }
    result["targets"] = targets
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for k, v in result.items():
        print(f"{k:34} {v}")


if __name__ == "__main__":
    main()
