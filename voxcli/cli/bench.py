"""`voxcli bench`: latency benchmarks for CI (`bench ttfa`, `bench history`; `bench asr` when present).

Thin: flags and config budgets in, `voxcli.bench.ttfa` runs, rich
tables on stderr or one JSON document on stdout, exit 1 when a budget fails.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from voxcli.cli.errors import err, guarded
from voxcli.cli.complete import complete_tts_model
from voxcli.errors import ExitCode, UsageError

TTFA_HELP = """\
Measure time-to-first-audio of streaming TTS, warm (one loaded voice) and
optionally cold (a fresh `python -m voxcli speak --raw` per run).

Default text set: a short phrase, one sentence, a three-sentence paragraph,
and a paragraph fed as small LLM-like deltas (push mode). Per run: TTFA,
audible TTFA (first sample above -40 dBFS on a simulated real-time player),
RTF, longest gap between chunks, underruns, total. Every run is appended to
the bench history (see `voxcli bench history`).

Budgets (--max-p50-ms/--max-p95-ms, or \\[bench] max_p50_ms/max_p95_ms in the
config file) apply to the warm TTFA pooled over all texts; exceeding one
exits 1 with a line naming the metric and the measured value.

[bold]Examples[/bold]

  voxcli bench ttfa                                   default text set, 5 runs each
  voxcli bench ttfa --runs 20 --compare batch         with the non-streaming baseline
  voxcli bench ttfa --text "Hello there." --cold      include process start + model load
  voxcli bench ttfa --json --max-p95-ms 300 > bench.json    CI gate (exit 1 if slower)
"""

HISTORY_HELP = """\
Show the trend of every bench metric over the recorded runs (p50 per run).

[bold]Examples[/bold]

  voxcli bench history
  voxcli bench history --last 10
  voxcli bench history --json | jq '.[-1].metrics.ttfa_ms'
"""


def _read_text_file(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read text: {e}") from None


def register(app: typer.Typer) -> None:
    bench_app = typer.Typer(
        help="Latency benchmarks (TTFA, history) for people and CI.",
        no_args_is_help=True,
        rich_markup_mode="rich",
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.add_typer(bench_app, name="bench")

    @bench_app.command("ttfa", help=TTFA_HELP)
    @guarded
    def ttfa(
        voice: Annotated[Optional[str], typer.Option("--voice", "-v", help="Voice name (default: config/tts default).", autocompletion=complete_tts_model)] = None,
        text: Annotated[Optional[str], typer.Option("--text", "-t", help="Benchmark this text instead of the default set.")] = None,
        file: Annotated[Optional[str], typer.Option("--file", "-f", help="Read the text from a file ('-' = stdin).")] = None,
        runs: Annotated[Optional[int], typer.Option("--runs", "-n", min=1, help="Measured runs per text (default: 5).")] = None,
        warmup: Annotated[Optional[int], typer.Option("--warmup", min=0, help="Discarded runs per text (default: 1).")] = None,
        cold: Annotated[bool, typer.Option("--cold", help="Also time fresh processes (start -> first PCM byte).")] = False,
        compare: Annotated[Optional[str], typer.Option("--compare", help="Baseline to compare with: batch.")] = None,
        delta_rate: Annotated[float, typer.Option("--delta-rate", min=1.0, help="Push mode: deltas per second.")] = 50.0,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
        max_p50_ms: Annotated[Optional[float], typer.Option("--max-p50-ms", min=0.0, help="Fail (exit 1) if warm TTFA p50 exceeds this.")] = None,
        max_p95_ms: Annotated[Optional[float], typer.Option("--max-p95-ms", min=0.0, help="Fail (exit 1) if warm TTFA p95 exceeds this.")] = None,
        no_history: Annotated[bool, typer.Option("--no-history", help="Do not append this run to the history.")] = False,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No tables on stderr (budget failures still print).")] = False,
    ) -> None:
        from voxcli.config import load_config
        from voxcli.bench import report as bench_report, ttfa as bench_ttfa

        if text is not None and file is not None:
            raise UsageError("give --text or --file, not both")
        if compare not in (None, "batch"):
            raise UsageError(f"--compare must be 'batch', got {compare!r}")
        cfg = load_config()
        for w in cfg.warnings:
            err(f"voxcli: warning: {w}")
        runs = runs or cfg.bench.runs or 5
        warmup = warmup if warmup is not None else (cfg.bench.warmup if cfg.bench.warmup is not None else 1)
        budgets = {
            "max_p50_ms": max_p50_ms if max_p50_ms is not None else cfg.bench.max_p50_ms,
            "max_p95_ms": max_p95_ms if max_p95_ms is not None else cfg.bench.max_p95_ms,
        }
        texts = list(bench_ttfa.iter_texts(text, _read_text_file(file) if file is not None else None))
        voice_name = voice or cfg.tts.voice

        import voxcli
        from voxcli.cli.errors import STATE

        loaded = voxcli.load_voice(voice_name, offline=STATE.offline or None)
        name = getattr(loaded, "name", None) or voice_name or "default"

        def progress(item, kind: str, i: int, ms: float) -> None:
            if not quiet and not as_json:
                err(f"  {item.name:<10} {kind:<5} run {i + 1}/{runs}: {ms:7.1f} ms")

        reports = bench_ttfa.run_warm(
            loaded, texts, runs, warmup, batch=compare == "batch", delta_rate=delta_rate, on_run=progress
        )
        if cold:
            for rep in reports:
                for i in range(runs):
                    ms = bench_ttfa.run_cold(rep.item.text, voice_name)
                    rep.cold_ms.append(ms)
                    progress(rep.item, "cold", i, ms)
        all_runs = [r for rep in reports for r in rep.runs]
        overall = bench_ttfa.summarize_runs(all_runs)
        violations = bench_report.check_budgets(overall, budgets["max_p50_ms"], budgets["max_p95_ms"])
        doc = bench_report.build_document(
            reports, voice=name, sample_rate=getattr(loaded, "sample_rate", None), runs=runs, warmup=warmup,
            budgets=budgets, violations=violations, cold=cold, compare=compare,
        )
        if not no_history:
            bench_report.append_history(bench_report.history_entry(doc))
        if as_json:
            print(json.dumps(doc, indent=2), flush=True)
        elif not quiet:
            from rich.console import Console

            from voxcli.cli.views.bench import histogram, metrics_table

            console = Console(stderr=True)
            console.print(f"[bold]bench ttfa[/bold] voice {name}, {runs} runs + {warmup} warm-up per text",
                          highlight=False)
            console.print(metrics_table(doc))
            console.print(histogram([r.ttfa_ms for r in all_runs]))
        for v in violations:
            err(f"voxcli: {v.message()}")
        if violations:
            raise typer.Exit(int(ExitCode.ERROR))

    @bench_app.command("history", help=HISTORY_HELP)
    @guarded
    def history(
        last: Annotated[int, typer.Option("--last", min=1, help="Show the last N runs.")] = 30,
        as_json: Annotated[bool, typer.Option("--json", help="Print the entries as a JSON array on stdout.")] = False,
    ) -> None:
        from voxcli.config import bench_history_path
        from voxcli.bench.report import HISTORY_METRICS, read_history

        entries = read_history(limit=last)
        if as_json:
            print(json.dumps(entries, indent=2), flush=True)
            return
        if not entries:
            err(f"no bench history yet ({bench_history_path()}); run `voxcli bench ttfa` first")
            return
        from rich.console import Console

        from voxcli.cli.views.bench import history_table

        console = Console(stderr=True)
        console.print(
            f"[bold]bench history[/bold]: {len(entries)} run(s), {entries[0]['timestamp']} .. "
            f"{entries[-1]['timestamp']} ({bench_history_path()})", highlight=False,
        )
        console.print(history_table(entries, (*HISTORY_METRICS, "cold_ttfa_ms")))

    if importlib.util.find_spec("voxcli.cli.bench_asr") is not None:
        importlib.import_module("voxcli.cli.bench_asr").register_bench(bench_app)
