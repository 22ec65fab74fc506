"""`voxcli ledger`: the latency budget of one voice turn, and `voxcli ledger schedule`.

The command only gathers the seven terms (preset < config file < measured <
flag), hands them to the pure model in `voxcli.bench.ledger`, and renders the
result: a waterfall on stderr, or one JSON document on stdout with `--json`.
"""
from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from voxcli.cli.errors import err, guarded
from voxcli.bench import ledger as model
from voxcli.errors import UsageError

HELP = f"""\
The latency budget of one voice turn, from the user's last syllable to the
first reply audio they hear:

  total = uplink + max(endpoint hold, ASR tail) + hops + LLM first token
          + TTS first audio + downlink

The endpoint hold and the ASR tail run at the same time, so only the longer
one counts. Terms come from the preset, then the config file's \\[ledger]
section, then --measured, then flags.

[bold]Presets[/bold]

  default    {model.PRESET_SOURCES['default']}

  webrtc     {model.PRESET_SOURCES['webrtc']}

  telephony  {model.PRESET_SOURCES['telephony']}

[bold]Examples[/bold]

  voxcli ledger                                   the default turn (1,045 ms)
  voxcli ledger --preset telephony --llm-ttft-ms 600
  voxcli ledger --sensitivity                     what 100 ms off each term buys
  voxcli ledger --measured                        fill terms from this machine
  voxcli ledger --json | jq .total_ms
  voxcli ledger schedule --words 3,8,16 --rtf 0.9 --overhead-ms 60
"""

SCHEDULE_HELP = """\
Check an incremental TTS chunk schedule for playback underruns.

Each chunk of N words lasts N / wpm minutes; a serial producer makes it in
RTF x audio + overhead; playback starts when the first chunk is ready. Every
chunk that is not ready when the previous one ends leaves a hole.

[bold]Examples[/bold]

  voxcli ledger schedule --words 3,8,16 --rtf 0.3 --overhead-ms 60 --wpm 150
  voxcli ledger schedule --words 3,8,16 --rtf 0.9        a 1.74 s hole after chunk 1
  voxcli ledger schedule --words 2,4,8,16 --rtf 0.5 --json
"""

TermOpt = Optional[float]


def _term_option(term: str) -> object:
    flag = "--" + term.replace("_", "-")
    return typer.Option(flag, min=0.0, help=f"{model.LABELS[term]} in ms (overrides preset/config/measured).")


def _gather(
    preset: str, flags: dict[str, float | None], measured: bool
) -> tuple[model.TurnBudget, dict[str, str], dict, str]:
    """Resolve each term and remember where it came from."""
    from voxcli.config import load_config

    cfg = load_config()
    for w in cfg.warnings:
        err(f"voxcli: warning: {w}")
    name = preset or cfg.ledger.preset or "default"
    try:
        base = model.preset(name)
    except ValueError as e:
        raise UsageError(str(e)) from None
    values = base.to_dict()
    sources = {t: "preset" for t in model.TERMS}
    for t in model.TERMS:
        v = getattr(cfg.ledger, t)
        if v is not None:
            values[t], sources[t] = v, "config"
    details: dict = {}
    if measured:
        from voxcli.bench.ledger_measure import measure_terms

        from voxcli.cli.errors import STATE

        notes = measure_terms(cfg, on_note=lambda s: err(f"voxcli: {s}"), offline=STATE.offline or None)
        for t, m in notes.items():
            values[t], sources[t] = m.value_ms, m.source
            details[t] = m.to_dict()
    for t, v in flags.items():
        if v is not None:
            values[t], sources[t] = v, "flag"
    for t in model.TERMS:
        if measured and not sources[t].startswith(("measured", "flag", "config", "bench", "turn")):
            sources[t] = "assumed"
    return model.TurnBudget(**values), sources, details, name


def register(app: typer.Typer) -> None:
    ledger_app = typer.Typer(
        help=HELP, rich_markup_mode="rich", context_settings={"help_option_names": ["-h", "--help"]}
    )
    app.add_typer(ledger_app, name="ledger")

    @ledger_app.callback(invoke_without_command=True)
    @guarded
    def ledger(
        ctx: typer.Context,
        preset: Annotated[
            str, typer.Option("--preset", "-p", help="default | webrtc | telephony (config \\[ledger] preset).")
        ] = "",
        uplink_ms: Annotated[TermOpt, _term_option("uplink_ms")] = None,
        endpoint_ms: Annotated[TermOpt, _term_option("endpoint_ms")] = None,
        asr_tail_ms: Annotated[TermOpt, _term_option("asr_tail_ms")] = None,
        hops_ms: Annotated[TermOpt, _term_option("hops_ms")] = None,
        llm_ttft_ms: Annotated[TermOpt, _term_option("llm_ttft_ms")] = None,
        tts_first_audio_ms: Annotated[TermOpt, _term_option("tts_first_audio_ms")] = None,
        downlink_ms: Annotated[TermOpt, _term_option("downlink_ms")] = None,
        sensitivity: Annotated[
            bool, typer.Option("--sensitivity", help="Show how much the total drops per 100 ms off each term.")
        ] = False,
        measured: Annotated[
            bool,
            typer.Option(
                "--measured",
                help="Measure TTS first audio (and the ASR tail) here; endpoint hold from the config; "
                "LLM first token from chat's turn log.",
            ),
        ] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    ) -> None:
        if ctx.invoked_subcommand:
            return
        flags = {
            "uplink_ms": uplink_ms, "endpoint_ms": endpoint_ms, "asr_tail_ms": asr_tail_ms,
            "hops_ms": hops_ms, "llm_ttft_ms": llm_ttft_ms, "tts_first_audio_ms": tts_first_audio_ms,
            "downlink_ms": downlink_ms,
        }
        budget, sources, details, preset_name = _gather(preset, flags, measured)
        led = model.compute(budget)
        if as_json:
            doc = {"preset": preset_name, **led.to_dict(), "sources": sources}
            if details:
                doc["measurements"] = details
            print(json.dumps(doc, indent=2), flush=True)
            return
        from rich.console import Console

        from voxcli.cli.views.ledger import waterfall

        console = Console(stderr=True)
        fixed = 36 + max(len(v) for v in sources.values()) + (6 if sensitivity else 0)
        width = max(24, min(72, console.width - fixed))
        console.print(f"[bold]Turn latency[/bold], preset {preset_name}", highlight=False)
        console.print(waterfall(led, sources, width=width, show_sensitivity=sensitivity))
        for term, d in details.items():
            console.print(f"[dim]{model.LABELS[term]}: {d['value_ms']:.0f} ms, {d['detail']}[/dim]", highlight=False)

    @ledger_app.command("schedule", help=SCHEDULE_HELP)
    @guarded
    def schedule(
        words: Annotated[str, typer.Option("--words", help="Words per chunk, comma separated.")] = "3,8,16",
        rtf: Annotated[float, typer.Option("--rtf", min=0.0, help="Synthesis time / audio time.")] = 0.3,
        overhead_ms: Annotated[
            float, typer.Option("--overhead-ms", min=0.0, help="Fixed cost per chunk (phonemize, model call).")
        ] = 60.0,
        wpm: Annotated[float, typer.Option("--wpm", min=1.0, help="Speaking rate, words per minute.")] = 150.0,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    ) -> None:
        try:
            counts = [int(w) for w in words.replace(" ", "").split(",") if w]
        except ValueError:
            raise UsageError(f"--words must be comma-separated whole numbers, got {words!r}") from None
        if not counts or any(c <= 0 for c in counts):
            raise UsageError(f"--words needs at least one chunk and every chunk at least one word, got {words!r}")
        s = model.schedule(counts, rtf=rtf, overhead_s=overhead_ms / 1000.0, wpm=wpm)
        if as_json:
            print(json.dumps(s.to_dict(), indent=2), flush=True)
            return
        from rich.console import Console

        from voxcli.cli.views.ledger import schedule_table

        Console(stderr=True).print(schedule_table(s))

