#!/usr/bin/env python3
"""How long the speaker takes to play N seconds of audio while the CPU is busy, per output latency.

    python benchmarks/bench_underrun.py                    # 12 busy processes, 3 s of tone, 2 rounds
    python benchmarks/bench_underrun.py --busy 0 --json    # the same on a quiet machine

Arms, interleaved round by round on the same device (a PulseAudio null sink of the bench's own,
removed at the end; the daemon is started like the device tests do when none is running):

- `low-fixed`: PortAudio's low latency, never reopened (voxcli before the reopen);
- `high`:      the device's high latency from the start;
- `default`:   what voxcli does (`voxcli.audio.player.Player()`): low latency, reopened with the
               high one after `ESCALATE_UNDERRUNS` underruns within `ESCALATE_WINDOW_S`.

The busy processes are plain `while True: pass` loops at nice -5 (more CPU than the player's
thread gets), started before and stopped after the whole run. Reported per arm: wall time from
the first write to the end of `drain` (capped by `--timeout-s`), underruns, the final latency.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

import numpy as np
from room_relay import Sinks  # (benchmarks/ is the script's directory)


def _play(arm: str, seconds: float, timeout_s: float) -> dict:
    import sounddevice as sd

    from voxcli.audio.player import Player

    low = float(sd.query_devices("pulse", kind="output")["default_low_output_latency"])
    latency = {"low-fixed": low, "high": "high", "default": "low"}[arm]
    tone = (0.1 * np.sin(np.arange(int(seconds * 16000)) / 5.0)).astype(np.float32)
    with Player(16000, "pulse", latency=latency) as p:
        t0 = time.monotonic()
        p.write(tone, timeout=timeout_s)
        ok = p.drain(max(1.0, timeout_s - (time.monotonic() - t0)))
        wall = time.monotonic() - t0
        return {"arm": arm, "played_s": round(wall, 2), "drained": ok, "underruns": p.underflows,
                "reopened": p.reopened, "latency_ms": round(1000 * p.latency, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", type=int, default=12, help="busy-loop processes during the run (default 12)")
    ap.add_argument("--seconds", type=float, default=3.0, help="audio played per trial (default 3)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of every arm (default 2)")
    ap.add_argument("--arms", default="low-fixed,high,default")
    ap.add_argument("--timeout-s", type=float, default=150.0, help="a trial gives up after this long")
    ap.add_argument("--json", action="store_true", help="one JSON line per trial, then a summary line")
    a = ap.parse_args()
    sinks = Sinks(name=f"voxunderrun{os.getpid()}")  # the user's default sink is left alone
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a cancelled job still stops the busy loops
    busy: list[subprocess.Popen] = []
    rows: list[dict] = []
    try:
        for _ in range(a.busy):  # nice -5 needs root; elsewhere they run at the default priority
            busy.append(subprocess.Popen(["nice", "-n", "-5", sys.executable, "-c", "while True: pass"]))
        time.sleep(1.0 if busy else 0.0)
        for r in range(a.rounds):
            for arm in a.arms.split(","):
                row = {"round": r, **_play(arm, a.seconds, a.timeout_s), "load": round(os.getloadavg()[0], 1)}
                rows.append(row)
                print(json.dumps(row) if a.json else
                      f"{arm:10s} {a.seconds:.0f} s played in {row['played_s']:6.1f} s  underruns {row['underruns']:3d}"
                      f"  reopened {row['reopened']!s:5s}  latency {row['latency_ms']} ms  load {row['load']}",
                      flush=True)
    finally:
        for b in busy:
            b.kill()
        sinks.close()
    summary = {arm: statistics.median(x["played_s"] for x in rows if x["arm"] == arm) for arm in a.arms.split(",")}
    print(json.dumps({"event": "summary", "busy": a.busy, "seconds": a.seconds, "median_played_s": summary})
          if a.json else "median wall time to play: " + ", ".join(f"{k} {v:.1f} s" for k, v in summary.items()))


if __name__ == "__main__":
    main()
