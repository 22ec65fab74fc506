"""`voxcli bench asr`: WER (batch vs streaming), retractions, commit delay, RTF, memory.

Registered into the `bench` group by `voxcli.cli.bench`. The model and the
endpoint hold come from flag > env > config > default like in `transcribe`
and `chat` (it used to ignore every `asr.*` setting), so a bench measures what
the user's configuration runs.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from voxcli.cli.complete import complete_asr_model
from voxcli.cli.errors import STATE, err, guarded
from voxcli.cli.options import (
    AgreementOpt,
    EndpointMsOpt,
    JsonOpt,
    OfflineOpt,
    QuietOpt,
    SpeedOpt,
    StepMsOpt,
    VerboseOpt,
    command_config,
)
from voxcli.errors import ExitCode, UsageError

ASR_HELP = """\
Measure streaming ASR on recordings with reference transcripts.

Per file and overall: batch WER (offline, VAD-segmented), streaming WER (the
final stable text), retractions of stable text (must be 0), commit delay
p50/p95 (audio time from a word's first appearance to its commit), worker
RTF, max lag, peak memory. WER ignores case and punctuation and spells out
numbers. Input is paced at --speed (1 = real time, the honest setting; 0 =
unpaced, every step decoded). Exits 1 if any stable text was retracted.

REFS are text files, one per FILE in the same order; without --ref, FILE's
sibling with the extension .txt is used. The model and --endpoint-ms default
to the config's asr.model and asr.endpoint_ms (or VOXCLI_ASR_*). Repeat
--model to compare models on the same files in one run (one model loaded at
a time; each model's peak memory is its own); --json then adds "models".

[bold]Examples[/bold]

  voxcli bench asr beckett.wav two_cities.wav --ref beckett.txt --ref two_cities.txt
  voxcli bench asr talk.wav --speed 0 --json | jq .summary
  voxcli bench asr beckett.wav -m moonshine-tiny-en -m whisper-tiny-en   # side by side
"""


def _reference(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such reference file", hint="give --ref REF.txt for each FILE") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read the reference: {e}") from None


@guarded
def bench_asr(
    files: Annotated[list[str], typer.Argument(metavar="FILE...", help="Recordings (any format soundfile reads).", show_default=False)],
    refs: Annotated[Optional[list[str]], typer.Option("--ref", help="Reference transcript file, one per FILE, in order.")] = None,
    speed: SpeedOpt = 1.0,
    step_ms: StepMsOpt = None,
    agreement: AgreementOpt = None,
    endpoint_ms: EndpointMsOpt = None,
    models: Annotated[Optional[list[str]], typer.Option(
        "--model", "-m", help="ASR model; repeat to compare models side by side on the same files "
        "(default: config asr.model, else the one `transcribe` runs: see `voxcli doctor`).", autocompletion=complete_asr_model,
        show_default=False)] = None,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    offline: OfflineOpt = False,
) -> None:
    """Streaming ASR quality and latency on reference recordings (the `voxcli bench asr` command)."""
    from voxcli.asr.models import load_asr
    from voxcli.audio.files import audio_info, read_audio
    from voxcli.audio.pcm import sanitize
    from voxcli.bench.asr import BenchConfig, run_models
    from voxcli.cli.views.bench import asr_file_line, show_asr, show_asr_compare
    from voxcli.config import resolve

    refs = refs or [str(Path(f).with_suffix(".txt")) for f in files]
    if len(refs) != len(files):
        raise UsageError(f"{len(files)} file(s) but {len(refs)} --ref", hint="give one --ref per FILE, in order")
    cfg = command_config()
    # The first model goes through the resolver (flag > env > config > default, logged); the rest are flags.
    first_model = resolve("asr.model", models[0] if models else None, config=cfg)
    names = list(dict.fromkeys([first_model, *(models or [])[1:]]))
    endpoint = int(resolve("asr.endpoint_ms", endpoint_ms, config=cfg))
    texts = [_reference(r) for r in refs]
    for f in files:  # every header checked before a model loads; the audio is decoded one file at a time
        audio_info(f)

    def items() -> Any:
        return ((f, sanitize(read_audio(f, rate=16000)[0])[0], t) for f, t in zip(files, texts))

    def progress(name: str, fr: Any) -> None:
        if not quiet:
            err((f"{name}: " if len(names) > 1 else "") + asr_file_line(fr.to_dict()))

    config = BenchConfig(speed=speed, step_ms=step_ms, agreement=agreement, endpoint_ms=endpoint)
    runs = run_models(names, lambda n: load_asr(n, offline=STATE.offline or None), items, config, on_file=progress)
    first = runs[0]
    if json_out:  # the single-model schema (first model) plus every model under "models"
        doc = {"model": first.model, "summary": first.result.summary(),
               "files": [f.to_dict() for f in first.result.files], "models": [r.to_dict() for r in runs]}
        sys.stdout.write(json.dumps(doc) + "\n")
    elif not quiet and len(runs) == 1:
        show_asr(first.result.summary(), first.model)
    elif not quiet:
        show_asr_compare([(r.model, r.load_s, r.result.summary()) for r in runs])
    retracted = sum(r.result.summary()["retractions"] for r in runs)
    if retracted:
        err(f"voxcli: error: {retracted} retraction(s) of stable text")
        raise typer.Exit(int(ExitCode.ERROR))
