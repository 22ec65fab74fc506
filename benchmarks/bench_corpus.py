#!/usr/bin/env python3
"""Corpus throughput: `--jobs 1` vs `--jobs 2` vs Ray (local, 2 workers) on the same generated corpus.

    python benchmarks/bench_corpus.py                  # 20 min of audio in 60 s files (the issue's figure)
    python benchmarks/bench_corpus.py --minutes 2      # a quick run
    python benchmarks/bench_corpus.py --json           # one JSON line per mode + a summary line

The corpus is real speech (beckett.wav and two_cities.wav of the
speech-samples model, with 1 s pauses) concatenated into files of
`--file-s` seconds in a temp dir that is deleted afterwards (nothing is
stored). Each mode transcribes the whole corpus through
`voxcli.transcribe_many` into its own output dir; the wall time includes
starting the worker processes and loading the model in each (what a user
waits for), except the Ray cluster's own start-up, which is timed apart
(a cluster is normally already running). Reported: audio-seconds per
second per mode, the scaling ratio jobs2/jobs1 (goal >= 1.7 on 2 free
cores) and Ray's overhead vs --jobs at equal worker count (goal <= 10 %),
and whether all modes wrote identical transcripts. On a shared machine
the figures are noisy: compare ratios from one run only.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SR = 16000


def make_corpus(root: Path, minutes: float, file_s: float) -> float:
    """Write files of about `file_s` seconds until `minutes` of audio; returns the audio seconds written."""
    import soundfile as sf

    from voxcli.audio.files import read_audio
    from voxcli.hub.resolve import resolve_model

    b = resolve_model("speech-samples", kind="data")
    gap = np.zeros(SR, np.float32)
    clips = [read_audio(b.file(n), SR)[0] for n in ("beckett.wav", "two_cities.wav")]
    total, n, k = 0.0, 0, 0
    while total < minutes * 60:
        parts: list[np.ndarray] = []
        while sum(p.size for p in parts) < file_s * SR:
            parts += [clips[k % 2], gap]
            k += 1
        audio = np.concatenate(parts)
        sf.write(str(root / f"part-{n:04d}.wav"), audio, SR, subtype="PCM_16")
        total += audio.size / SR
        n += 1
    return total


def run_mode(name: str, corpus: Path, out: Path, **kw) -> dict:
    import voxcli

    t0 = time.perf_counter()
    res = list(voxcli.transcribe_many([str(corpus)], out, **kw))
    wall = time.perf_counter() - t0
    audio = sum(r.audio_s for r in res)
    failed = sum(r.status == "failed" for r in res)
    return {"mode": name, "files": len(res), "failed": failed, "audio_s": round(audio, 1),
            "wall_s": round(wall, 2), "audio_s_per_s": round(audio / wall, 2)}


def transcripts(out: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(out.glob("*.txt"))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=20.0, help="audio in the corpus (default 20)")
    ap.add_argument("--file-s", type=float, default=60.0, help="seconds per file (default 60)")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray mode")
    ap.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="voxcli-bench-corpus-") as d:
        root = Path(d)
        (root / "in").mkdir()
        audio = make_corpus(root / "in", args.minutes, args.file_s)
        rows = [run_mode("jobs1", root / "in", root / "jobs1", jobs=1),
                run_mode("jobs2", root / "in", root / "jobs2", jobs=2)]
        ray_init_s = None
        if not args.no_ray:
            import ray

            t0 = time.perf_counter()
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            ray_init_s = round(time.perf_counter() - t0, 2)
            rows.append(run_mode("ray2", root / "in", root / "ray2", jobs=2, ray="local"))
            ray.shutdown()
        same = all(transcripts(root / r["mode"]) == transcripts(root / "jobs1") for r in rows)
    by = {r["mode"]: r for r in rows}
    summary = {"event": "summary", "corpus_audio_s": round(audio, 1), "identical_transcripts": same,
               "scaling_jobs2_over_jobs1": round(by["jobs2"]["audio_s_per_s"] / by["jobs1"]["audio_s_per_s"], 3),
               "ray_init_s": ray_init_s}
    if "ray2" in by:
        summary["ray_overhead_vs_jobs2"] = round(by["ray2"]["wall_s"] / by["jobs2"]["wall_s"] - 1, 3)
    if args.json:
        for r in rows:
            print(json.dumps({"event": "mode", **r}))
        print(json.dumps(summary))
    else:
        for r in rows:
            print(f"{r['mode']:6s} {r['files']:4d} files  {r['audio_s']:8.1f} s audio  {r['wall_s']:7.2f} s wall  "
                  f"{r['audio_s_per_s']:7.2f} audio-s/s" + (f"  {r['failed']} failed" if r["failed"] else ""))
        print(" ".join(f"{k}={v}" for k, v in summary.items() if k != "event"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
