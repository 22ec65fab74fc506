"""`voxcli ledger`: the latency budget of one voice turn, driven by the seed's knobs.

Subcommands: `experiments` (the seed's four), `frontier` (latency vs flicker,
measured on real speech), `schedule` (TTS chunk underruns). The command only
gathers knobs and terms (preset < config file < environment < measured <
flag), hands them to the pure models in `voxcli.bench.ledger*`, and renders
the result: a waterfall on stderr, or one JSON document on stdout with `--json`.
"""
from __future__ import annotations

import json
from typing import Annotated, Any, Optional

import typer

from voxcli.bench import ledger as model
from voxcli.bench import ledger_knobs as knobs_model
from voxcli.cli.errors import STATE, err, guarded
from voxcli.cli.options import ENDPOINT_MS_MAX, ENDPOINT_MS_MIN, JsonOpt, OfflineOpt, VerboseOpt, command_config, flag
from voxcli.errors import UsageError

_N = knobs_model.NETWORKS
HELP = f"""\
The latency of one voice turn, from the user's last syllable to the first
reply audio they hear, computed the way the Streaming Speech lesson's
instrument does (Chapter 6): after the user stops, the endpoint hold and the
ASR tail run in parallel, so only the longer one counts; everything after is
a serial sum.

  total = uplink + max(endpoint hold, ASR tail) + hops + LLM first token
          + TTS first audio + downlink

[bold]Knobs[/bold] (each moves one or more terms; defaults are the seed's)

  --chunk-ms           ASR chunk = update interval, ms (140 = 14 frames).
                       ASR tail = chunk + (n - 1) x chunk + 70 ms
                       compute: the last chunk must fill, then n - 1
                       more must agree.
  --agreement          LocalAgreement n (2): a word is stable once n
                       hypotheses agree on it.
  --first-chunk-words  Words in the first TTS chunk (1). TTS first audio =
                       60 ms + words x 400 ms (150 wpm) x RTF 0.1.
  --endpoint-ms        Endpoint hold: silence before the turn ends (250 ms).
  --network            default | webrtc | telephony | device: uplink,
                       downlink and hops.

LLM first token is 375 ms (no knob moves it; --llm-ttft-ms overrides it).
The --<term>-ms flags override any derived term.

[bold]Networks[/bold]

  default    {_N['default'].source}

  webrtc     {_N['webrtc'].source}

  telephony  {_N['telephony'].source}

  device     {_N['device'].source}

[bold]Presets[/bold] (knob settings)

  default    {knobs_model.PRESET_SOURCES['default']}

  webrtc     {knobs_model.PRESET_SOURCES['webrtc']}

  telephony  {knobs_model.PRESET_SOURCES['telephony']}

[bold]Examples[/bold]

  voxcli ledger                               the seed's turn: 1,045 ms
  voxcli ledger --chunk-ms 40                 945 ms: the hold is the max
  voxcli ledger --first-chunk-words 12        +440 ms
  voxcli ledger --agreement 3 --chunk-ms 300  1,665 ms, past the limit
  voxcli ledger --preset telephony            worst case: 2,555 ms
  voxcli ledger --measured                    this machine, config in force
  voxcli ledger experiments                   the seed's four experiments
  voxcli ledger frontier                      latency vs flicker
  voxcli ledger --json | jq .total_ms
"""

EXPERIMENTS_HELP = """\
Run the seed's four experiments on the instrument and check each claim.

[bold]Experiments[/bold]

  (1) find the max: chunk 140 -> 40 ms stops mattering once the hold wins
  (2) first chunk 1 -> 12 words adds about 440 ms
  (3) n = 3 with a 300 ms chunk: 300 + 600 ms of tail, past 1,400 ms
  (4) the telephony worst case is past 2.5 s

Exit 1 if a claim does not hold.

[bold]Examples[/bold]

  voxcli ledger experiments
  voxcli ledger experiments --json | jq .all_hold
"""

FRONTIER_HELP = """\
Latency versus flicker, one curve per agreement n, sweeping the chunk size.

Flicker is measured, not modelled: the recognizer re-decodes real speech
(beckett.wav) every --grid-ms, LocalAgreement-n as the seed writes it runs
over those hypotheses at each chunk size, and every stable word it later
replaces counts (per 100 final words). Commit delay is the mean time from a
word's first appearance to its first promotion to stable. Turn latency is the
ledger's total for that chunk and n (other knobs from the flags/preset).
Points marked * are on the frontier (nothing is better on both axes).

[bold]Examples[/bold]

  voxcli ledger frontier                    chunks 100-500 ms, n = 1, 2, 3
  voxcli ledger frontier --chunks 200,400 --agreements 1,2 --json
  voxcli ledger frontier -p telephony       the turn axis on a phone line
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
RAW_TERMS = tuple(t for t in model.TERMS if t != "endpoint_ms")  # the hold is a knob

PresetOpt = Annotated[Optional[str], typer.Option(
    "--preset", "-p", show_default=False,
    help="Knob settings: default | webrtc | telephony (the seed's telephony worst case). "
         "Default: config ledger.preset, else default.")]
ChunkOpt = Annotated[Optional[float], typer.Option(
    "--chunk-ms", min=10.0, max=5000.0, show_default=False,
    help="ASR chunk = update interval, ms (preset: 140 = 14 frames). Tail = chunk + (n-1) x chunk + 70 ms.")]
AgreeOpt = Annotated[Optional[int], typer.Option(
    "--agreement", min=1, max=5, show_default=False,
    help="LocalAgreement n: hypotheses that must agree before a word is stable (preset: 2).")]
WordsOpt = Annotated[Optional[int], typer.Option(
    "--first-chunk-words", min=1, max=100, show_default=False,
    help="Words in the first TTS chunk (preset: 1); each word adds 40 ms to the first audio.")]
HoldOpt = Annotated[Optional[float], typer.Option(
    "--endpoint-ms", min=ENDPOINT_MS_MIN, max=ENDPOINT_MS_MAX, show_default=False,
    help="Endpoint hold: silence before the turn ends, ms (preset: 250).")]
NetOpt = Annotated[Optional[str], typer.Option(
    "--network", show_default=False,
    help="default | webrtc | telephony | device: uplink, downlink and hops (preset: default; --measured: device).")]


def _term_option(term: str) -> Any:
    return typer.Option("--" + term.replace("_", "-"), min=0.0, show_default=False,
                        help=f"Override the {model.LABELS[term]} term, ms.")


def _knobs(preset: str | None, flags: dict[str, Any], measured: bool, cfg: Any,
           endpoint: str | None = None) -> tuple[Any, dict[str, str], str]:
    """Preset (or, with --measured, the configuration in force) with the knob flags laid over it."""
    from voxcli.config import resolve

    name = resolve("ledger.preset", preset, config=cfg)
    try:
        base = knobs_model.preset(name)
        knobs = base.with_(network=flags["network"])  # validates the network name early
    except ValueError as e:
        raise UsageError(str(e)) from None
    sources = {k: "preset" for k in knobs_model.KNOB_TERMS}
    if measured:
        from voxcli.bench.ledger_measure import engine_knobs

        knobs, engine_src = engine_knobs(cfg, flags["network"] or "device", endpoint)  # voxcli runs on-device
        sources.update(engine_src)
    try:
        knobs = knobs.with_(**flags)
    except ValueError as e:
        raise UsageError(str(e)) from None
    sources.update({k: "flag" for k, v in flags.items() if v is not None})
    return knobs, sources, name


def _gather(preset: str | None, knob_flags: dict[str, Any], term_flags: dict[str, float | None], measured: bool,
            endpoint: str | None = None) -> tuple[model.TurnBudget, dict[str, Any], dict[str, str], dict[str, Any]]:
    """Resolve knobs, then each term (derived < config < env < measured < flag), remembering where each came from."""
    from voxcli.config import resolve

    cfg = command_config()
    knobs, knob_src, name = _knobs(preset, knob_flags, measured, cfg, endpoint)
    values = knobs_model.derive(knobs).to_dict()
    sources: dict[str, str] = {}
    for knob, terms in knobs_model.KNOB_TERMS.items():
        for t in terms:
            src = knob_src[knob]
            if sources.get(t) != "flag":  # a term moved by two knobs is "flag" if either came from a flag
                sources[t] = "flag" if src == "flag" else ("preset" if src in ("preset", "engine default") else src)
    sources["llm_ttft_ms"] = "preset"
    term_flags = {**term_flags, "endpoint_ms": knob_flags["endpoint_ms"]}  # the hold is a knob and a term
    for t in model.TERMS:
        value = resolve(f"ledger.{t}", term_flags.get(t), config=cfg)
        if term_flags.get(t) is not None:
            values[t], sources[t] = value, "flag"
        elif value is not None and sources[t] != "flag":
            values[t], sources[t] = value, cfg.sources.get(f"ledger.{t}", "config")
    details: dict[str, Any] = {}
    if measured:
        from voxcli.bench.ledger_measure import measure_terms

        found = measure_terms(cfg, knobs, knob_src, on_note=lambda s: err(f"voxcli: {s}"),
                              offline=STATE.offline or None)
        for t, m in found.items():
            if sources.get(t) != "flag":
                values[t], sources[t] = m.value_ms, m.source
                details[t] = m.to_dict()
        sources = {t: ("assumed" if s == "preset" else s) for t, s in sources.items()}
    doc = {"preset": name, "knobs": knobs.to_dict(), "knob_sources": knob_src,
           "derivation": {"asr_tail_parts": knobs_model.asr_tail_parts(knobs),
                          "tts_first_audio_parts": knobs_model.tts_first_audio_parts(knobs)}}
    return model.TurnBudget(**values), doc, sources, details


@guarded
def ledger(
    ctx: typer.Context,
    preset: PresetOpt = None,
    chunk_ms: ChunkOpt = None,
    agreement: AgreeOpt = None,
    first_chunk_words: WordsOpt = None,
    endpoint_ms: HoldOpt = None,
    network: NetOpt = None,
    uplink_ms: Annotated[TermOpt, _term_option("uplink_ms")] = None,
    asr_tail_ms: Annotated[TermOpt, _term_option("asr_tail_ms")] = None,
    hops_ms: Annotated[TermOpt, _term_option("hops_ms")] = None,
    llm_ttft_ms: Annotated[TermOpt, _term_option("llm_ttft_ms")] = None,
    tts_first_audio_ms: Annotated[TermOpt, _term_option("tts_first_audio_ms")] = None,
    downlink_ms: Annotated[TermOpt, _term_option("downlink_ms")] = None,
    sensitivity: Annotated[bool, flag("--sensitivity", help="Show how much the total drops per 100 ms off each term.")] = False,
    measured: Annotated[bool, flag(
        "--measured", help="This machine with the configuration in force (asr.endpoint_ms, agreement, step, TTS "
        "first chunk; network device unless --network): run the streamer on real speech (ASR tail and the "
        "overlap it achieved), measure TTS first audio, read LLM first token from chat's turn log.")] = False,
    endpoint: Annotated[str | None, typer.Option(
        "--endpoint", show_default=False, help="With --measured: chat's end of turn, vad | semantic (config "
        "asr.endpoint): predict the turn as chat schedules it (preemptive reply; the detector's holds).")] = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
    offline: OfflineOpt = False,
) -> None:
    """The latency budget of one voice turn (the `voxcli ledger` command)."""
    if ctx.invoked_subcommand:
        return
    knob_flags = {"chunk_ms": chunk_ms, "agreement": agreement, "first_chunk_words": first_chunk_words,
                  "endpoint_ms": endpoint_ms, "network": network}
    term_flags = {"uplink_ms": uplink_ms, "asr_tail_ms": asr_tail_ms, "hops_ms": hops_ms, "llm_ttft_ms": llm_ttft_ms,
                  "tts_first_audio_ms": tts_first_audio_ms, "downlink_ms": downlink_ms}
    if endpoint is not None and endpoint not in ("vad", "semantic"):
        raise UsageError(f"--endpoint must be vad or semantic, not {endpoint!r}")
    budget, doc, sources, details = _gather(preset, knob_flags, term_flags, measured, endpoint)
    led = model.compute(budget)
    turns = None
    if measured:
        from voxcli.bench.ledger_measure import measure_engine, measured_turns

        eng = measure_engine(command_config(), budget, endpoint, offline=STATE.offline or None)
        details["engine"] = eng.to_dict()  # chat's own schedule: what its turn log is compared with
        turns = measured_turns(eng.value_ms, mode=(eng.data or {}).get("endpoint"))
    if json_out:
        out = {**doc, **led.to_dict(), "sources": sources}
        if details:
            out["measurements"] = details
        if turns is not None:
            out["measured_turns"] = turns
        print(json.dumps(out, indent=2), flush=True)
        return
    from voxcli.cli.views.ledger import show_ledger

    show_ledger(led, sources, details, doc["preset"], sensitivity=sensitivity, knobs=doc["knobs"],
                derivation=doc["derivation"], turns=turns)


@guarded
def experiments(json_out: JsonOpt = False) -> None:
    """The seed's four experiments (the `voxcli ledger experiments` command)."""
    runs = knobs_model.experiments()
    if json_out:
        print(json.dumps({"experiments": [e.to_dict() for e in runs], "all_hold": all(e.holds for e in runs)},
                         indent=2), flush=True)
    else:
        from voxcli.cli.views.ledger import show_experiments

        show_experiments(runs)
    if not all(e.holds for e in runs):
        raise typer.Exit(1)


def _numbers(text: str, name: str, cast: Any) -> list[Any]:
    """The comma-separated values of a list option (`--chunks`, `--agreements`, `--words`), each > 0."""
    try:
        values = [cast(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        kind = "whole numbers" if cast is int else "numbers"
        raise UsageError(f"{name} must be comma-separated {kind}, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise UsageError(f"{name} needs at least one value, each > 0, got {text!r}")
    return values


@guarded
def frontier(
    chunks: Annotated[str, typer.Option("--chunks", help="Chunk sizes to sweep, ms, comma separated "
                                        "(each a multiple of --grid-ms).")] = "100,200,300,400,500",
    agreements: Annotated[str, typer.Option("--agreements", help="Agreement n values, comma separated: one curve each.")] = "1,2,3",
    grid_ms: Annotated[float, typer.Option("--grid-ms", min=20.0, max=2000.0,
                                           help="Re-decode interval of the one recognizer pass, ms.")] = 100.0,
    seconds: Annotated[Optional[float], typer.Option("--seconds", min=1.0, show_default=False,
                                                     help="Use only the first N s of the speech.")] = None,
    preset: PresetOpt = None,
    first_chunk_words: WordsOpt = None,
    endpoint_ms: HoldOpt = None,
    network: NetOpt = None,
    json_out: JsonOpt = False,
    offline: OfflineOpt = False,
) -> None:
    """Latency vs flicker per agreement n (the `voxcli ledger frontier` command)."""
    from voxcli.bench.ledger_frontier import frontier as sweep, measure_hypotheses
    from voxcli.config import resolve

    cs = _numbers(chunks, "--chunks", float)
    ns = _numbers(agreements, "--agreements", int)
    bad = [c for c in cs if abs(round(c / grid_ms) * grid_ms - c) > 1e-6]
    if bad:
        raise UsageError(f"--chunks must be multiples of --grid-ms {grid_ms:g}, got {', '.join(f'{c:g}' for c in bad)}")
    knobs, _src, _name = _knobs(preset, {"first_chunk_words": first_chunk_words, "endpoint_ms": endpoint_ms,
                                         "network": network}, False, command_config())
    hyps, info = measure_hypotheses(grid_ms, max_s=seconds, offline=STATE.offline or None,
                                    model=resolve("asr.model", config=command_config()))
    points = sweep(hyps, grid_ms, cs, ns, knobs)
    if json_out:
        print(json.dumps({"knobs": knobs.to_dict(), "run": info, "points": [p.to_dict() for p in points]}, indent=2),
              flush=True)
        return
    from voxcli.cli.views.ledger import show_frontier

    show_frontier(points, info)


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
    from voxcli.bench.ledger_schedule import schedule as simulate

    counts = _numbers(words, "--words", int)
    s = simulate(counts, rtf=rtf, overhead_s=overhead_ms / 1000.0, wpm=wpm)
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
    ledger_app.command("experiments", help=EXPERIMENTS_HELP)(experiments)
    ledger_app.command("frontier", help=FRONTIER_HELP)(frontier)
    ledger_app.command("schedule", help=SCHEDULE_HELP)(schedule)
    app.add_typer(ledger_app, name="ledger")
