"""`voxcli ledger`: the latency budget of one voice turn, and `voxcli ledger schedule`.

The command only gathers the seven terms (preset < config file < environment
< measured < flag), hands them to the pure model in `voxcli.bench.ledger`, and renders the
result: a waterfall on stderr, or one JSON document on stdout with `--json`.
"""
from __future__ import annotations

import json
from typing import Annotated, Any, Optional

import typer

from voxcli.bench import ledger as model
from voxcli.cli.errors import STATE, err, guarded
from voxcli.cli.options import (
    ENDPOINT_MS_MIN,
    ENDPOINT_MS_MAX,
    JsonOpt,
    OfflineOpt,
    VerboseOpt,
    command_config,
    flag,
)
from voxcli.errors import UsageError

HELP = f"""\
The latency budget of one voice turn, from the user's last syllable to the
first reply audio they hear:

  total = uplink + max(endpoint hold, ASR tail) + hops + LLM first token
          + TTS first audio + downlink

The endpoint hold and the ASR tail run at the same time, so only the longer
one counts. Each term comes from the first of: a flag, --measured, the
environment (VOXCLI_LEDGER_<TERM>), the config file's \\[ledger] section,
the preset.

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


def _term_option(term: str) -> Any:
    flag_name = "--" + term.replace("_", "-")
    # --endpoint-ms has one range CLI-wide (voxcli.cli.options); the other terms may be 0.
    lo, hi = (ENDPOINT_MS_MIN, ENDPOINT_MS_MAX) if term == "endpoint_ms" else (0.0, None)
    return typer.Option(flag_name, min=lo, max=hi, show_default=False,
                        help=f"{model.LABELS[term]} in ms (overrides preset/config/measured).")


def _gather(
    preset: str | None, flags: dict[str, float | None], measured: bool
) -> tuple[model.TurnBudget, dict[str, str], dict[str, Any], str]:
    """Resolve each term (flag > measured > env > config > preset) and remember where it came from."""
    from voxcli.config import resolve

    cfg = command_config()
    name = resolve("ledger.preset", preset, config=cfg)
    try:
        base = model.preset(name).to_dict()
    except ValueError as e:
        raise UsageError(str(e)) from None
    values: dict[str, float] = {}
    sources: dict[str, str] = {}
    for t in model.TERMS:
        key = f"ledger.{t}"
        value = resolve(key, flags[t], config=cfg)  # None: neither flag, env nor config set it
        if flags[t] is not None:
            values[t], sources[t] = value, "flag"
        elif value is not None:
            values[t], sources[t] = value, cfg.sources.get(key, "config")
        else:
            values[t], sources[t] = base[t], "preset"
    details: dict[str, Any] = {}
    if measured:
        from voxcli.bench.ledger_measure import measure_terms

        notes = measure_terms(cfg, on_note=lambda s: err(f"voxcli: {s}"), offline=STATE.offline or None)
        for t, m in notes.items():
            if sources[t] != "flag":
                values[t], sources[t] = m.value_ms, m.source
                details[t] = m.to_dict()
        for t in model.TERMS:
            if sources[t] == "preset":
                sources[t] = "assumed"
    return model.TurnBudget(**values), sources, details, name


@guarded
def ledger(
    ctx: typer.Context,
    preset: Annotated[Optional[str], typer.Option(
        "--preset", "-p", show_default=False,
        help="default | webrtc | telephony (default: config ledger.preset, else default).")] = None,
    uplink_ms: Annotated[TermOpt, _term_option("uplink_ms")] = None,
    endpoint_ms: Annotated[TermOpt, _term_option("endpoint_ms")] = None,
    asr_tail_ms: Annotated[TermOpt, _term_option("asr_tail_ms")] = None,
    hops_ms: Annotated[TermOpt, _term_option("hops_ms")] = None,
    llm_ttft_ms: Annotated[TermOpt, _term_option("llm_ttft_ms")] = None,
    tts_first_audio_ms: Annotated[TermOpt, _term_option("tts_first_audio_ms")] = None,
    downlink_ms: Annotated[TermOpt, _term_option("downlink_ms")] = None,
    sensitivity: Annotated[bool, flag("--sensitivity", help="Show how much the total drops per 100 ms off each term.")] = False,
    measured: Annotated[bool, flag(
        "--measured", help="Measure TTS first audio (and the ASR tail) here; endpoint hold from the config; "
        "LLM first token from chat's turn log.")] = False,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
    offline: OfflineOpt = False,
) -> None:
    """The latency budget of one voice turn (the `voxcli ledger` command)."""
    if ctx.invoked_subcommand:
        return
    flags = {
        "uplink_ms": uplink_ms, "endpoint_ms": endpoint_ms, "asr_tail_ms": asr_tail_ms,
        "hops_ms": hops_ms, "llm_ttft_ms": llm_ttft_ms, "tts_first_audio_ms": tts_first_audio_ms,
        "downlink_ms": downlink_ms,
    }
    budget, sources, details, preset_name = _gather(preset, flags, measured)
    led = model.compute(budget)
    if json_out:
        doc = {"preset": preset_name, **led.to_dict(), "sources": sources}
        if details:
            doc["measurements"] = details
        print(json.dumps(doc, indent=2), flush=True)
        return
    from voxcli.cli.views.ledger import show_ledger

    show_ledger(led, sources, details, preset_name, sensitivity=sensitivity)


@guarded
def schedule(
    words: Annotated[str, typer.Option("--words", help="Words per chunk, comma separated.")] = "3,8,16",
    rtf: Annotated[float, typer.Option("--rtf", min=0.0, help="Synthesis time / audio time.")] = 0.3,
    overhead_ms: Annotated[
        float, typer.Option("--overhead-ms", min=0.0, help="Fixed cost per chunk (phonemize, model call).")
    ] = 60.0,
    wpm: Annotated[float, typer.Option("--wpm", min=1.0, help="Speaking rate, words per minute.")] = 150.0,
    json_out: JsonOpt = False,
) -> None:
    """Check a TTS chunk schedule for underruns (the `voxcli ledger schedule` command)."""
    try:
        counts = [int(w) for w in words.replace(" ", "").split(",") if w]
    except ValueError:
        raise UsageError(f"--words must be comma-separated whole numbers, got {words!r}") from None
    if not counts or any(c <= 0 for c in counts):
        raise UsageError(f"--words needs at least one chunk and every chunk at least one word, got {words!r}")
    s = model.schedule(counts, rtf=rtf, overhead_s=overhead_ms / 1000.0, wpm=wpm)
    if json_out:
        print(json.dumps(s.to_dict(), indent=2), flush=True)
        return
    from voxcli.cli.views.ledger import show_schedule

    show_schedule(s)


def register(app: typer.Typer) -> None:
    ledger_app = typer.Typer(
        help=HELP, rich_markup_mode="rich", context_settings={"help_option_names": ["-h", "--help"]}
    )
    ledger_app.callback(invoke_without_command=True)(ledger)
    ledger_app.command("schedule", help=SCHEDULE_HELP)(schedule)
    app.add_typer(ledger_app, name="ledger")
