#!/usr/bin/env python3
"""WER (batch, streamed, as emitted), RTF and memory of every ASR model on the dev set v2, in one run.

    python benchmarks/bench_asr_devset.py                     # 4 models, --speed 1 (real time)
    python benchmarks/bench_asr_devset.py --speed 0 -m moonshine-tiny-en -m whisper-tiny-en
    python benchmarks/bench_asr_devset.py --from run.json     # re-print a saved run

Builds the dev set (tests/whisper/devset.py: 17 human recordings, at least 5
speakers, + 8 espeak-ng voices) into a directory, runs `voxcli bench asr FILES -m A -m B
... --json` on it (one process, the models one after another on the same
files), saves the JSON and prints one table per group: "recordings" (human
speech), "espeak" and all. WER does not depend on the machine's load; RTF and
the end of speech -> final delay do, so say how busy the machine was.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MODELS = ["moonshine-tiny-en", "whisper-tiny-en", "whisper-base", "moonshine-base-en"]


def group_figures(files: list[dict], group: str | None) -> dict:
    """Word-weighted WERs of the files of one group (None: all); file names start with their group."""
    chosen = [f for f in files if group is None or Path(f["file"]).name.startswith(group + "-")]
    words = sum(f["ref_words"] for f in chosen) or 1
    audio = sum(f["audio_s"] for f in chosen) or 1.0
    return {
        "files": len(chosen), "ref_words": words,
        **{k: sum(f[k] * f["ref_words"] for f in chosen) / words for k in ("batch_wer", "stream_wer", "emitted_wer")},
        "worker_rtf": sum(f["worker_rtf"] * f["audio_s"] for f in chosen) / audio,
    }


def wer_lines(doc: dict, key: str = "model", width: int = 20) -> list[str]:
    """Per group of the dev set (recordings, espeak voices, all): WER batch / streamed / emitted and RTF per run."""
    lines = []
    for group in ("recordings", "espeak", None):
        lines.append(f"\n{group or 'all'}:")
        lines.append(f"{key:{width}} {'words':>5} {'batch':>7} {'stream':>7} {'emitted':>8} {'rtf':>5}")
        for run in doc["models"]:
            g = group_figures(run["files"], group)
            lines.append(f"{run[key]:{width}} {g['ref_words']:5d} {g['batch_wer'] * 100:6.1f}% "
                         f"{g['stream_wer'] * 100:6.1f}% {g['emitted_wer'] * 100:7.1f}% {g['worker_rtf']:5.2f}")
    return lines


def table(doc: dict) -> str:
    lines = wer_lines(doc)
    lines.append(f"\n{'model':20} {'peak MB':>8} {'final p50':>9} {'retract':>7} {'max lag':>7}")
    for run in doc["models"]:
        s = run["summary"]
        lines.append(f"{run['model']:20} {s['peak_rss_mb']:8.0f} {s['final_delay_p50_s'] or 0:8.2f}s "
                     f"{s['retractions']:7d} {s['max_lag_s']:6.1f}s")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", action="append", help="model (repeatable; default: the four ASR models)")
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--out", default="", help="where to save the JSON of `bench asr` (default: a temp file)")
    ap.add_argument("--from", dest="from_json", default="", help="print the tables of a saved run")
    args = ap.parse_args()
    if args.from_json:
        print(table(json.loads(Path(args.from_json).read_text())))
        return 0
    from tests.conftest import REAL_CACHE
    from tests.whisper.devset import dev_clips, export

    work = Path(tempfile.mkdtemp(prefix="voxcli-devset-"))
    files = export(dev_clips(REAL_CACHE, work / "espeak"), work / "set")
    cmd = [sys.executable, "-m", "voxcli", "bench", "asr", *map(str, files), "--speed", str(args.speed), "--json"]
    for m in args.model or MODELS:
        cmd += ["-m", m]
    print("voxcli bench asr " + f"<{len(files)} files in {work / 'set'}> " + " ".join(cmd[5 + len(files):]),
          file=sys.stderr)
    run = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    out = Path(args.out) if args.out else work / "bench.json"
    out.write_text(run.stdout)
    print(f"saved {out} (exit {run.returncode}: 1 = retractions of stable text, see the table)", file=sys.stderr)
    print(table(json.loads(run.stdout)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
