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
    python benchmarks/bench_tts.py --slack   # issue 13 item 5: min slack vs the playhead, 1 vs 2 stages
    python benchmarks/bench_tts.py --flush   # issue 13 item 4: choosing max_buffer_flush_ms
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


# -- issue 13 item 5: slack of each chunk against a real-time player ---------------------------

SLACK_PARAGRAPH = (
    "Yes. "
    "The history of the lighthouse on the northern cape begins in the winter of eighteen forty, when a "
    "merchant ship carrying timber, salt and letters from the capital ran aground on the rocks below the "
    "cliffs, and the village decided, after a long and bitter argument in the church hall, that a light "
    "must be built before the next storm season arrived. "
    "It took four years. "
    "The keepers who followed kept careful logs of every ship that passed, every storm that broke over the "
    "headland, and every repair they made to the great lamp, and those logs, written in a small and patient "
    "hand, are now kept in the town museum where visitors can read them on rainy afternoons. "
    "Some entries are short. "
    "Others run for pages and describe nights when the wind was so strong that the keeper tied himself to "
    "the railing of the gallery with a rope, climbed the ladder with a can of oil in one hand, and kept the "
    "flame alive until dawn while the sea threw spray as high as the lantern room itself. "
    "In nineteen sixty the light was automated. "
    "The last keeper, an old man with a white beard and a dog named Captain, stayed on in the cottage at the "
    "foot of the tower for another twenty years, painting the door every spring and telling anyone who would "
    "listen that a machine could turn a lamp on and off but could never truly watch the sea. "
    "He was quite right."
)


def slack_run(voice, ahead: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Play the paragraph on a VirtualSpeaker; slack of chunk i = end of chunk i-1's playback - ready time."""
    from voxcli.audio.virtual import VirtualSpeaker
    from voxcli.tts.streamer import StreamerConfig

    s = TTSStreamer(voice, StreamerConfig(front_ahead=ahead))
    speaker = VirtualSpeaker(voice.sample_rate, keep=False)
    s.send(SLACK_PARAGRAPH)
    s.finish()
    slacks, starts, prev_end, first = [], [], None, True
    for c in s.output:
        if c.kind != "audio":
            break
        ready = s.t0 + c.t_emit  # type: ignore[operator]
        if prev_end is not None:
            slacks.append(prev_end - ready)
            starts.append(bool(c.text))  # the first block of a sentence (its front part before it)
        speaker.write(c.audio)
        start = time.perf_counter() if first else max(time.perf_counter(), prev_end)  # type: ignore[type-var]
        prev_end, first = start + c.duration_s, False
    speaker.drain(5)
    speaker.close()
    at_starts = [x for x, st in zip(slacks, starts) if st]
    return {"front_ahead": ahead, "chunks": len(slacks) + 1, "min_slack_ms": round(1000 * min(slacks), 1),
            "min_slack_at_chunk": slacks.index(min(slacks)) + 1,
            "sentence_start_min_slack_ms": round(1000 * min(at_starts), 1),
            "sentence_start_p50_slack_ms": round(1000 * sorted(at_starts)[len(at_starts) // 2], 1),
            "negative_slacks": sum(x < 0 for x in slacks), "speaker_underrun_ms": round(1000 * speaker.underrun_s, 1),
            "ttfa_ms": round(1000 * (c.stats.ttfa_s or 0), 1), "rtf": round(c.stats.rtf, 3)}  # type: ignore[union-attr]


def bench_slack() -> dict[str, object]:
    voice = load_voice()
    list(voice.stream("Warm up the sessions. " * 3))
    words = len(SLACK_PARAGRAPH.split())
    runs = [slack_run(voice, 0), slack_run(voice, 2)]  # one run each: before (one stage), after (two)
    return {"words": words, "cpu_count": os.cpu_count(), "load_avg_1m": os.getloadavg()[0], "runs": runs}


# -- issue 13 item 4: how long real LLM text waits for a boundary -------------------------------

FLUSH_PROMPTS = (
    "Explain in three sentences why the sky is blue.",
    "Give me a short recipe for pancakes.",
    "What should I pack for a weekend hiking trip?",
    "Tell me a short story about a cat who learns to swim.",
    "How does a refrigerator keep food cold?",
    "What are three tips for sleeping better?",
)


def record_reply(llm, voice, prompt: str, max_tokens: int) -> list[tuple[float, str]]:  # type: ignore[no-untyped-def]
    """Deltas of one on-device reply with arrival times, spoken while they arrive (contention as in chat)."""
    import threading

    s = TTSStreamer(voice)
    drain = threading.Thread(target=lambda: list(s.output), daemon=True)
    drain.start()
    t0, events = time.perf_counter(), []
    for d in llm.stream([{"role": "user", "content": prompt}], max_new_tokens=max_tokens):
        if d.text:
            events.append((time.perf_counter() - t0, d.text))
            s.send(d.text)
    s.finish()
    drain.join(120)
    return events


def replay(events: list[tuple[float, str]], flush_ms: float) -> tuple[list[float], int]:
    """Feed recorded deltas through TextIntake on their own clock; (wait of each piece, time-cut pieces)."""
    import bisect
    import threading

    from voxcli.tts.chunker import ChunkerConfig
    from voxcli.tts.intake import TextIntake

    now = [0.0]
    intake = TextIntake(ChunkerConfig(), max_pending_chars=1 << 30, flush_ms=flush_ms, clock=lambda: now[0])
    halt = threading.Event()
    offsets, times, total = [], [], 0
    for t, text in events:
        offsets.append(total)
        times.append(t)
        total += len(text)
    waits, start = [], 0

    def take() -> None:
        nonlocal start
        while intake.ready:
            piece = intake.next_text(halt) or ""
            waits.append(now[0] - times[bisect.bisect_right(offsets, start) - 1])
            start += len(piece)

    for t, text in events:
        while (due := intake.poll()) is not None and now[0] + due <= t:
            now[0] += max(due, 1e-6)
        take()
        now[0] = t
        intake.send(text, block=False, cancel=halt, alive=lambda: True)
        take()
    return waits, intake.flushes


def bench_flush(max_tokens: int = 80) -> dict[str, object]:
    from voxcli.bench.metrics import summarize as summ
    from voxcli.llm.local import load_local_llm

    llm, voice = load_local_llm(), load_voice()
    record_reply(llm, voice, "Say hello.", 16)  # warm-up
    replies = [record_reply(llm, voice, p, max_tokens) for p in FLUSH_PROMPTS]
    waits = [w for r in replies for w in replay(r, 0)[0]]
    gaps = [b[0] - a[0] for r in replies for a, b in zip(r, r[1:])]
    table = {}
    for ms in (250, 500, 750, 1000, 1500, 2000):
        table[ms] = sum(replay(r, ms)[1] for r in replies)
    tokens_s = [len(r) / r[-1][0] for r in replies if r and r[-1][0] > 0]
    return {"replies": len(replies), "deltas_per_s_p50": round(summ(tokens_s).p50, 1),
            "delta_gap_ms": summ(gaps).to_dict(1000), "boundary_wait_ms": summ(waits).to_dict(1000),
            "time_cut_pieces_by_flush_ms": table, "load_avg_1m": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    ap.add_argument("--skip-piper", action="store_true", help="do not run piper-tts's paths")
    ap.add_argument("--slack", action="store_true", help="min slack vs the playhead, one vs two producer stages")
    ap.add_argument("--flush", action="store_true", help="boundary waits of on-device LLM replies per max_buffer_flush_ms")
    args = ap.parse_args()
    if args.slack or args.flush:
        result = bench_slack() if args.slack else bench_flush()
        print(json.dumps(result, indent=None if args.json else 2))
        return

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
