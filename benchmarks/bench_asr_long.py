#!/usr/bin/env python3
"""Hours of speech through the streaming ASR at accelerated pace: memory and per-step cost must stay flat.

    python benchmarks/bench_asr_long.py --hours 4            # lockstep: as fast as the worker goes
    python benchmarks/bench_asr_long.py --hours 1 --speed 20 # paced at 20x real time (re-decodes may skip)
    python benchmarks/bench_asr_long.py --hours 0.5 --json   # one JSON line per window + a summary

The stream is real speech (beckett.wav and two_cities.wav from the
speech-samples model) with 1.5 s pauses, looped, fed in 100 ms blocks like
`voxcli transcribe -`; captions are consumed as they come. Every window (10
minutes of audio by default) reports the process RSS, the worker's seconds
per second of audio (its per-step cost), the decode count, the longest
buffer and the lag behind the input. Flat means: the RSS of the last window
within a few MB of the first after warm-up, and the same cost per audio
second at hour 4 as at minute 10 — growth would be a leak (captions,
transcript, VAD scores, buffers) or a buffer that is never trimmed.
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SR = 16000
BLOCK = SR // 10


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def speech_loop() -> np.ndarray:
    from voxcli.audio.files import read_audio
    from voxcli.hub.resolve import resolve_model

    b = resolve_model("speech-samples", kind="data")
    parts = []
    for name in ("beckett.wav", "two_cities.wav"):
        parts += [read_audio(b.file(name), SR)[0], np.zeros(int(1.5 * SR), np.float32)]
    return np.concatenate(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, default=4.0)
    ap.add_argument("--speed", type=float, default=0.0, help="x real time; 0 = lockstep (worker sets the pace)")
    ap.add_argument("--window-min", type=float, default=10.0, help="minutes of audio per report line")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from voxcli.asr.open_streamer import open_asr_streamer

    loop = speech_loop()
    total = int(args.hours * 3600 * SR)
    window = int(args.window_min * 60 * SR)
    streamer = open_asr_streamer(lockstep=args.speed == 0)
    captions = [0]

    def consume() -> None:
        for cap in streamer.captions:
            captions[0] += 1

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    rows = []
    t0 = time.monotonic()
    sent = 0
    last = (0.0, 0, 0.0)  # decode_s, decodes, wall at the previous window
    pos = 0
    while sent < total:
        n = min(BLOCK, total - sent)
        end = pos + n
        block = loop[pos:end] if end <= loop.size else np.concatenate([loop[pos:], loop[: end - loop.size]])
        pos = end % loop.size
        streamer.send(block)
        sent += n
        if args.speed > 0:
            delay = t0 + sent / SR / args.speed - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        else:
            while streamer.pending_s > 1.0:  # lockstep: keep at most 1 s queued
                time.sleep(0.002)
        if sent % window == 0 or sent == total:
            st = streamer.stats
            wall = time.monotonic() - t0
            audio_w = window / SR if sent % window == 0 else (sent % window) / SR
            row = {
                "audio_h": round(sent / SR / 3600, 3),
                "rss_mb": round(rss_mb(), 1),
                "cost_s_per_audio_s": round((st.decode_s - last[0]) / audio_w, 4),
                "decodes": st.decodes - last[1],
                "skipped": st.skipped,
                "utterances": st.utterances,
                "max_buffer_s": round(st.max_buffer_s, 2),
                "lag_s": round(streamer.pending_s, 2),
                "wall_s": round(wall, 1),
                "x_real_time": round(audio_w / max(wall - last[2], 1e-9), 1),
            }
            last = (st.decode_s, st.decodes, wall)
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"{row['audio_h']:6.2f} h  rss {row['rss_mb']:7.1f} MB  cost {row['cost_s_per_audio_s']:.4f} s/s  "
                      f"decodes {row['decodes']:5d}  utt {row['utterances']:6d}  buf {row['max_buffer_s']:5.1f} s  "
                      f"lag {row['lag_s']:5.2f} s  {row['x_real_time']:5.1f}x", flush=True)
    streamer.finish()
    reader.join(10)
    base = rows[1] if len(rows) > 2 else rows[0]  # after warm-up (first window loads and JITs)
    summary = {
        "event": "summary", "hours": args.hours, "speed": args.speed, "windows": len(rows),
        "rss_first_mb": base["rss_mb"], "rss_last_mb": rows[-1]["rss_mb"],
        "rss_growth_mb": round(rows[-1]["rss_mb"] - base["rss_mb"], 1),
        "cost_first": base["cost_s_per_audio_s"], "cost_last": rows[-1]["cost_s_per_audio_s"],
        "cost_ratio": round(rows[-1]["cost_s_per_audio_s"] / base["cost_s_per_audio_s"], 3)
        if base["cost_s_per_audio_s"] else None,
        "captions": captions[0], "transcript_chars": len(streamer.text),
    }
    print(json.dumps(summary) if args.json else
          f"RSS {summary['rss_first_mb']} -> {summary['rss_last_mb']} MB ({summary['rss_growth_mb']:+} MB); "
          f"cost {summary['cost_first']} -> {summary['cost_last']} s/s (x{summary['cost_ratio']}); "
          f"{summary['captions']} captions, transcript {summary['transcript_chars']} chars")
    return 0


if __name__ == "__main__":
    sys.exit(main())
