"""`voxcli bench asr`: WER (batch vs streaming), retractions, commit delay, RTF, memory.

Registered into the `bench` group by `voxcli.cli.bench` through `register_bench`.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from voxcli.cli.errors import STATE, err, guarded
from voxcli.errors import UsageError

HELP = """\
Measure streaming ASR on recordings with reference transcripts.

Per file and overall: batch WER (offline, VAD-segmented), streaming WER (the
final stable text), retractions of stable text (must be 0), commit delay
p50/p95 (audio time from a word's first appearance to its commit), worker
RTF, max lag, peak memory. WER ignores case and punctuation and spells out
numbers. Input is paced at --speed (1 = real time, the honest setting; 0 =
unpaced, every step decoded). Exits 1 if any stable text was retracted.

REFS are text files, one per FILE in the same order; without --ref, FILE's
sibling with the extension .txt is used.

[bold]Examples[/bold]

  voxcli bench asr beckett.wav two_cities.wav --ref beckett.txt --ref two_cities.txt
  voxcli bench asr talk.wav --speed 0 --json | jq .summary
"""


def _reference(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such reference file", hint="give --ref REF.txt for each FILE") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read the reference: {e}") from None


def register_bench(bench_app: typer.Typer) -> None:
    @bench_app.command("asr", help=HELP, short_help="Streaming ASR quality and latency on reference recordings.")
    @guarded
    def bench_asr(
        files: Annotated[list[str], typer.Argument(metavar="FILE...", help="Recordings (any format soundfile reads).", show_default=False)],
        refs: Annotated[Optional[list[str]], typer.Option("--ref", help="Reference transcript file, one per FILE, in order.")] = None,
        speed: Annotated[float, typer.Option("--speed", min=0.0, help="Input pacing: 1 = real time, 0 = unpaced lockstep.")] = 1.0,
        step_ms: Annotated[int, typer.Option("--step-ms", min=100, help="Re-decode interval.")] = 500,
        agreement: Annotated[int, typer.Option("--agreement", min=1, max=5, help="LocalAgreement n.")] = 2,
        endpoint_ms: Annotated[int, typer.Option("--endpoint-ms", min=100, help="Silence that ends an utterance.")] = 500,
        model: Annotated[Optional[str], typer.Option("--model", "-m", help="ASR model name.")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")] = False,
    ) -> None:
        from voxcli.audio.files import read_audio
        from voxcli.audio.pcm import sanitize
        from voxcli.asr.streamer import load_asr
        from voxcli.bench.asr import BenchConfig, run_bench

        refs = refs or [str(Path(f).with_suffix(".txt")) for f in files]
        if len(refs) != len(files):
            raise UsageError(f"{len(files)} file(s) but {len(refs)} --ref", hint="give one --ref per FILE, in order")
        items = [(f, sanitize(read_audio(f, rate=16000)[0])[0], _reference(r)) for f, r in zip(files, refs)]
        asr, vad = load_asr(model, offline=STATE.offline)
        cfg = BenchConfig(speed=speed, step_ms=step_ms, agreement=agreement, endpoint_ms=endpoint_ms)

        def progress(fr) -> None:
            d = fr.to_dict()
            err(f"{d['file']}: {d['audio_s']:.1f} s  batch WER {d['batch_wer']:.1%}  stream WER {d['stream_wer']:.1%}  "
                f"retractions {d['retractions']}  delay p50 {d['commit_delay_p50_s']} s  RTF {d['worker_rtf']:.2f}")

        result = run_bench(asr, vad, items, cfg, on_file=progress)
        summary = result.summary()
        if json_out:
            sys.stdout.write(json.dumps({"summary": summary, "files": [f.to_dict() for f in result.files]}) + "\n")
        else:
            _table(summary)
        if summary["retractions"]:
            err(f"voxcli: error: {summary['retractions']} retraction(s) of stable text")
            raise typer.Exit(1)


def _table(s: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"bench asr: {s['files']} file(s), {s['audio_s']:.1f} s, {s['ref_words']} words, speed {s['speed']}")
    t.add_column("metric")
    t.add_column("value", justify="right")
    rows = [
        ("batch WER", f"{s['batch_wer']:.1%}"), ("streaming WER", f"{s['stream_wer']:.1%}"),
        ("retractions", str(s["retractions"])),
        ("commit delay p50", f"{s['commit_delay_p50_s']} s"), ("commit delay p95", f"{s['commit_delay_p95_s']} s"),
        ("worker RTF", f"{s['worker_rtf']:.2f}"), ("max lag", f"{s['max_lag_s']:.1f} s"),
        ("peak memory", f"{s['peak_rss_mb']:.0f} MB"),
    ]
    for k, v in rows:
        t.add_row(k, v)
    Console(stderr=True).print(t)
