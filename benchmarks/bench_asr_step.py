#!/usr/bin/env python3
"""Models at their own re-decode step, interleaved per clip on the dev set v2, in one process.

    python benchmarks/bench_asr_step.py -m moonshine-tiny-en@500 -m moonshine-base-en@1000
    python benchmarks/bench_asr_step.py --speed 0 -m moonshine-base-en@500 -m moonshine-base-en@1000
    python benchmarks/bench_asr_step.py -m moonshine-base-en@1000 -m moonshine-base-en@1000/2   # agreement n 3 vs 2
    python benchmarks/bench_asr_step.py --from run.json

Why beside bench_asr_devset.py: `voxcli bench asr` streams every model at one
`--step-ms` and runs the models one after another, so a model that needs a
longer step (moonshine-base-en, issue 16) cannot be compared with the fast
tier at its own step, and a change of load between the models skews the RTF
and the end of speech -> final delay. Here each clip is streamed by every
model in turn (`voxcli.bench.asr.bench_file`, paced at --speed), so both see
the same load. Tables as bench_asr_devset.py's, plus final p50 / p95 and
commit delay per model; peak memory is not separable in one process.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_asr_devset import wer_lines  # noqa: E402


def table(doc: dict) -> str:
    from voxcli.bench.metrics import percentile

    lines = [f"speed {doc['speed']}, load {doc['load_start']} -> {doc['load_end']}",
             *wer_lines({"models": [{**run, "model@step": run["spec"]} for run in doc["models"]]}, "model@step", 26)]
    lines.append(f"\n{'model@step':26} {'final p50':>9} {'p95':>6} {'commit p50':>10} {'p95':>6} {'max lag':>7}")
    for run in doc["models"]:
        finals = [d for f in run["files"] for d in f["final_delays_s"]]
        commits = [d for f in run["files"] for d in f["commit_delays_s"]]
        p = [percentile(v, q) if v else 0.0 for v, q in ((finals, 50), (finals, 95), (commits, 50), (commits, 95))]
        lag = max((f["max_lag_s"] for f in run["files"]), default=0.0)
        lines.append(f"{run['spec']:26} {p[0]:8.2f}s {p[1]:5.2f}s {p[2]:9.2f}s {p[3]:5.2f}s {lag:6.1f}s")
    return "\n".join(lines)


def run(specs: list[str], speed: float, group: str = "") -> dict:
    from tests.conftest import REAL_CACHE
    from tests.whisper.devset import dev_clips
    from voxcli.asr.models import load_asr
    from voxcli.audio.files import read_audio
    from voxcli.bench.asr import BenchConfig, bench_file

    models = []
    for spec in specs:
        name, _, step = spec.partition("@")
        step, _, agree = step.partition("/")  # MODEL@STEP/N: LocalAgreement n (default: the model's own)
        asr, vad = load_asr(name, offline=True)
        models.append((spec, asr, vad, BenchConfig(speed=speed, step_ms=int(step or 500), agreement=int(agree or 0) or None)))
    clips = [c for c in dev_clips(REAL_CACHE, Path(tempfile.mkdtemp(prefix="voxcli-step-")) / "espeak")
             if not group or c.group == group]
    doc = {"speed": speed, "load_start": round(os.getloadavg()[0], 1),
           "models": [{"spec": s, "files": []} for s, *_ in models]}
    for clip in clips:
        audio = read_audio(str(clip.path), rate=16000)[0]
        for (spec, asr, vad, cfg), out in zip(models, doc["models"]):
            vad.reset()
            r = bench_file(asr, vad, f"{clip.group}-{clip.name}", audio, clip.reference, cfg)
            out["files"].append({**r.to_dict(), "final_delays_s": r.final_delays, "commit_delays_s": r.delays})
            print(f"{spec}: {clip.name}: batch {r.batch.errors}/{r.batch.ref_words} stream {r.stream.errors} "
                  f"rtf {r.worker_rtf:.2f} load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    doc["load_end"] = round(os.getloadavg()[0], 1)
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", action="append", default=[], help="MODEL@STEP_MS[/AGREEMENT] (repeatable)")
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--out", default="", help="where to save the JSON")
    ap.add_argument("--group", choices=["recordings", "espeak"], default="", help="only these clips")
    ap.add_argument("--from", dest="from_json", default="", help="print the tables of a saved run")
    args = ap.parse_args()
    if args.from_json:
        print(table(json.loads(Path(args.from_json).read_text())))
        return 0
    doc = run(args.model or ["moonshine-tiny-en@500", "moonshine-base-en@1000"], args.speed, args.group)
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1))
    print(table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
