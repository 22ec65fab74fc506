"""`voxcli bench`: benchmarks for people and CI (`bench ttfa`, `bench history`, `bench asr`).

Thin: flags and config budgets in, `voxcli.bench.ttfa` runs, tables on
stderr (`voxcli.cli.views.bench`) or one JSON document on stdout, exit 1
when a budget fails.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from voxcli.cli.bench_asr import ASR_HELP, bench_asr
from voxcli.cli.errors import STATE, err, guarded
from voxcli.cli.options import JsonOpt, OfflineOpt, QuietOpt, VerboseOpt, VoiceOpt, command_config, flag
from voxcli.errors import ExitCode, UsageError
from voxcli.tts.profile import DEFAULT_SAFETY, DEFAULT_SNR_DB

TTFA_HELP = """\
Measure time-to-first-audio of streaming TTS, warm (one loaded voice) and
optionally cold (a fresh `python -m voxcli speak --raw` per run).

Default text set: a short phrase, one sentence, a three-sentence paragraph,
and a paragraph fed as small LLM-like deltas (push mode). Per run: TTFA,
audible TTFA (first sample above -40 dBFS on a simulated real-time player),
RTF, longest gap between chunks, underruns, total. Every run is appended to
the bench history (see `voxcli bench history`).

Budgets (--max-p50-ms/--max-p95-ms, else VOXCLI_BENCH_MAX_P50_MS/_P95_MS,
else \\[bench] max_p50_ms/max_p95_ms in the config file) apply to the warm
TTFA pooled over all texts; exceeding one exits 1 with a line naming the
metric and the measured value.

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


@dataclass(frozen=True)
class TTFASettings:
    """What `bench ttfa` runs with after flag > env > config > default."""

    voice: str | None
    """Voice name; None lets the loader pick the catalog's default."""
    runs: int
    """Measured runs per text."""
    warmup: int
    """Discarded runs per text (first calls pay allocations and caches)."""
    max_p50_ms: float | None
    """Budget on warm TTFA p50; None: no budget."""
    max_p95_ms: float | None
    """Budget on warm TTFA p95; None: no budget."""


def ttfa_settings(voice: str | None, runs: int | None, warmup: int | None,
                  max_p50_ms: float | None, max_p95_ms: float | None) -> TTFASettings:
    """The flags (None = not given) laid over env, config and the defaults table."""
    from voxcli.config import resolve

    cfg = command_config()
    given = {"voice": voice, "runs": runs, "warmup": warmup, "max_p50_ms": max_p50_ms, "max_p95_ms": max_p95_ms}
    keys = {"voice": "tts.voice", "runs": "bench.runs", "warmup": "bench.warmup",
            "max_p50_ms": "bench.max_p50_ms", "max_p95_ms": "bench.max_p95_ms"}
    values = {name: resolve(keys[name], flag_value, config=cfg) for name, flag_value in given.items()}
    return TTFASettings(**{**values, "runs": int(values["runs"]), "warmup": int(values["warmup"])})


@guarded
def ttfa(
    voice: VoiceOpt = None,
    text: Annotated[Optional[str], typer.Option("--text", "-t", help="Benchmark this text instead of the default set.")] = None,
    file: Annotated[Optional[str], typer.Option("--file", "-f", help="Read the text from a file ('-' = stdin).")] = None,
    runs: Annotated[Optional[int], typer.Option("--runs", "-n", min=1, show_default=False, help="Measured runs per text (default: config bench.runs, else 5).")] = None,
    warmup: Annotated[Optional[int], typer.Option("--warmup", min=0, show_default=False, help="Discarded runs per text (default: config bench.warmup, else 1).")] = None,
    cold: Annotated[bool, flag("--cold", help="Also time fresh processes (start -> first PCM byte).")] = False,
    compare: Annotated[Optional[str], typer.Option("--compare", help="Baseline to compare with: batch.")] = None,
    delta_rate: Annotated[float, typer.Option("--delta-rate", min=1.0, help="Push mode: deltas per second.")] = 50.0,
    json_out: JsonOpt = False,
    max_p50_ms: Annotated[Optional[float], typer.Option("--max-p50-ms", min=0.0, show_default=False, help="Fail (exit 1) if warm TTFA p50 exceeds this (default: config bench.max_p50_ms).")] = None,
    max_p95_ms: Annotated[Optional[float], typer.Option("--max-p95-ms", min=0.0, show_default=False, help="Fail (exit 1) if warm TTFA p95 exceeds this (default: config bench.max_p95_ms).")] = None,
    no_history: Annotated[bool, flag("--no-history", help="Do not append this run to the history.")] = False,
    calibrate: Annotated[bool, flag("--calibrate", help="Instead: measure this device and write the TTS profile "
                                    "`speak` uses (block sizes and context; see `voxcli doctor`).")] = False,
    safety: Annotated[float, typer.Option("--safety", min=1.0, help="With --calibrate: the schedule must keep up "
                                          "on a device this many times slower.")] = DEFAULT_SAFETY,
    snr_db: Annotated[float, typer.Option("--snr-db", min=10.0, help="With --calibrate: blocks within this SNR "
                                          "of whole decoding.")] = DEFAULT_SNR_DB,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    offline: OfflineOpt = False,
) -> None:
    """Time-to-first-audio of streaming TTS (the `voxcli bench ttfa` command)."""
    import voxcli
    from voxcli.bench import report as bench_report, ttfa as bench_ttfa

    if calibrate:
        run_calibration(voice, safety, snr_db, json_out, quiet)
        return

    if text is not None and file is not None:
        raise UsageError("give --text or --file, not both")
    if compare not in (None, "batch"):
        raise UsageError(f"--compare must be 'batch', got {compare!r}")
    st = ttfa_settings(voice, runs, warmup, max_p50_ms, max_p95_ms)
    texts = list(bench_ttfa.iter_texts(text, _read_text_file(file) if file is not None else None))
    loaded = voxcli.load_voice(st.voice, offline=STATE.offline or None)
    name = getattr(loaded, "name", None) or st.voice or "default"

    def progress(item: Any, kind: str, i: int, ms: float) -> None:
        if not quiet and not json_out:
            err(f"  {item.name:<10} {kind:<5} run {i + 1}/{st.runs}: {ms:7.1f} ms")

    reports = bench_ttfa.run_warm(
        loaded, texts, st.runs, st.warmup, batch=compare == "batch", delta_rate=delta_rate, on_run=progress
    )
    if cold:
        for rep in reports:
            for i in range(st.runs):
                ms = bench_ttfa.run_cold(rep.item.text, st.voice)
                rep.cold_ms.append(ms)
                progress(rep.item, "cold", i, ms)
    all_runs = [r for rep in reports for r in rep.runs]
    overall = bench_ttfa.summarize_runs(all_runs)
    violations = bench_report.check_budgets(overall, st.max_p50_ms, st.max_p95_ms)
    doc = bench_report.build_document(
        reports, voice=name, sample_rate=getattr(loaded, "sample_rate", None), runs=st.runs, warmup=st.warmup,
        budgets={"max_p50_ms": st.max_p50_ms, "max_p95_ms": st.max_p95_ms}, violations=violations, cold=cold,
        compare=compare,
    )
    if not no_history:
        bench_report.append_history(bench_report.history_entry(doc))
    if json_out:
        print(json.dumps(doc, indent=2), flush=True)
    elif not quiet:
        from voxcli.cli.views.bench import show_ttfa

        show_ttfa(doc, [r.ttfa_ms for r in all_runs])
    for v in violations:
        err(f"voxcli: {v.message()}")
    if violations:
        raise typer.Exit(int(ExitCode.ERROR))


def run_calibration(voice: str | None, safety: float, snr_db: float, json_out: bool, quiet: bool) -> None:
    """`bench ttfa --calibrate`: measure, write the profile atomically, show it and its schedule."""
    import voxcli
    from voxcli.bench.calibrate import calibrate
    from voxcli.config import resolve
    from voxcli.tts.profile import write_profile

    loaded = voxcli.load_voice(resolve("tts.voice", voice, config=command_config()), offline=STATE.offline or None)
    say = (lambda m: None) if quiet or json_out else (lambda m: err(f"  calibrating {m}"))
    result = calibrate(loaded, safety=safety, target_db=snr_db, on_step=say)
    path = write_profile(result.profile)
    if json_out:
        from dataclasses import asdict

        d = asdict(result)
        values = d.pop("profile")
        values.pop("path", None)
        print(json.dumps({"profile": str(path), "values": values, **d}, indent=2), flush=True)
        return
    if quiet:
        return
    p = result.profile
    err(f"context: lookback = lookahead = {p.lookback} frames -> {p.measured_snr_db:.1f} dB vs whole decoding "
        f"(target {p.snr_db:g} dB; " + ", ".join(f"{c}: {v:.0f}" for c, v in result.snr_by_context.items()) + ")")
    err(f"cost: {p.costs.call_s * 1000:.1f} ms per call + {p.costs.frame_s * 1000:.2f} ms per frame "
        f"(RTF {p.costs.frame_s / p.costs.audio_frame_s:.2f}); blocks: "
        + ", ".join(f"{n}: {s * 1000:.0f} ms" for n, s in result.seconds_by_size.items()))
    err(f"schedule (frames): {' '.join(map(str, result.sizes))}: underrun-free on a device {p.safety:g}x slower")
    err(f"wrote {path}: first_frames={p.first_frames} frames={p.frames} lookback={p.lookback} "
        f"lookahead={p.lookahead} overlap={p.overlap}; `voxcli speak` uses it now")


@guarded
def history(
    last: Annotated[int, typer.Option("--last", min=1, help="Show the last N runs.")] = 30,
    json_out: JsonOpt = False,
) -> None:
    """The trend of every bench metric (the `voxcli bench history` command)."""
    from voxcli.bench.report import HISTORY_METRICS, read_history
    from voxcli.config import bench_history_path

    entries = read_history(limit=last)
    if json_out:
        print(json.dumps(entries, indent=2), flush=True)
        return
    if not entries:
        err(f"no bench history yet ({bench_history_path()}); run `voxcli bench ttfa` first")
        return
    from voxcli.cli.views.bench import show_history

    show_history(entries, (*HISTORY_METRICS, "cold_ttfa_ms"), str(bench_history_path()))


def register(app: typer.Typer) -> None:
    bench_app = typer.Typer(
        help="Benchmarks for people and CI: TTS time-to-first-audio, streaming ASR, their history.",
        no_args_is_help=True,
        rich_markup_mode="rich",
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    bench_app.command("ttfa", help=TTFA_HELP, short_help="Time-to-first-audio of streaming TTS, warm and cold.")(ttfa)
    bench_app.command("history", help=HISTORY_HELP, short_help="The trend of every bench metric over the runs.")(history)
    bench_app.command("asr", help=ASR_HELP, short_help="Streaming ASR quality and latency on reference recordings.")(
        bench_asr)
    app.add_typer(bench_app, name="bench")
