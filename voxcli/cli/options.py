"""Every option more than one command takes, declared once as an `Annotated` alias.

Why: `--json` was declared 13 times under four parameter names, `--endpoint-ms`
three times with three ranges, and `-v` meant `--verbose` globally but
`--voice` in `speak`. A command now writes `json_out: JsonOpt = False` and
gets the same flag, help and range as every other command (the pattern of
huggingface_hub's `cli/_cli_utils.py`).

Short flags are reserved here, one meaning each, for the whole CLI:
  -h help  -v verbose  -q quiet  -o output file  -d device  -m ASR model
  -i chat input file  -t/-f bench text/file  -n bench runs  -p ledger preset
A command must not give any of them another meaning (tests/cli/test_options.py).

Boolean flags are built with `flag()`, which gives them an empty metavar:
typer's help otherwise prints `--raw <bool>` as if the flag took a value
(`voxcli.cli.views.help` also hides it for flags declared otherwise).

Values that have a config key (`--voice`, `--model`, `--device`,
`--endpoint-ms`) default to None here; the command passes them to
`voxcli.config.resolve()` (flag > env > config > default), so the defaults
live in one table (`voxcli.config.DEFAULTS`), not in the help strings.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from voxcli.cli.complete import (
    complete_asr_model,
    complete_input_device,
    complete_output_device,
    complete_tts_model,
)
from voxcli.cli.errors import STATE, log_to_stderr

ENDPOINT_MS_MIN = 100
ENDPOINT_MS_MAX = 10000

SHORT_FLAGS = {
    "-h": "--help", "-v": "--verbose", "-q": "--quiet", "-o": "--output", "-d": "--device",
    "-m": "--model", "-i": "--input", "-t": "--text", "-f": "--file", "-n": "--runs", "-p": "--preset",
}
"""The one meaning of every short flag in the CLI (a test walks every command against this)."""


def flag(*names: str, **kwargs: Any) -> Any:
    """A boolean option shown without a type in --help (no `<bool>` after the flag)."""
    return typer.Option(*names, metavar="", **kwargs)


def _offline(value: bool) -> bool:
    # `voxcli pull X --offline` means the same as `voxcli --offline pull X`.
    if value:
        STATE.offline = True
        os.environ["VOXCLI_OFFLINE"] = "1"  # the engine reads it at call time
    return value


def _verbose(value: bool) -> bool:
    # `voxcli speak --verbose ...` means the same as `voxcli --verbose speak ...`.
    if value and not STATE.debug:
        log_to_stderr(logging.INFO)
    return value


JsonOpt = Annotated[bool, flag(
    "--json", help="JSON on stdout instead of the human view (JSON lines for streams; see the examples).")]
QuietOpt = Annotated[bool, flag("--quiet", "-q", help="No display or summary on stderr (errors still print).")]
VerboseOpt = Annotated[bool, flag(
    "--verbose", "-v", callback=_verbose,
    help="Say what happens on stderr: models resolved, downloads, graph splits.")]
OfflineOpt = Annotated[bool, flag(
    "--offline", envvar="VOXCLI_OFFLINE", callback=_offline, help="Never download; fail (exit 3) if a model is missing.")]

VoiceOpt = Annotated[Optional[str], typer.Option(
    "--voice", help="TTS voice name (default: config tts.voice, else the catalog's).",
    autocompletion=complete_tts_model, show_default=False)]
ModelOpt = Annotated[Optional[str], typer.Option(
    "--model", "-m", help="ASR model name (default: config asr.model, else moonshine-base-en where `voxcli pull` "
    "timed it live on this machine, else moonshine-tiny-en; chat: moonshine-tiny-en; see `voxcli doctor`).",
    autocompletion=complete_asr_model, show_default=False)]
FinalModelOpt = Annotated[Optional[str], typer.Option(
    "--final-model", metavar="MODEL|none", help="Recognizer of each utterance's final transcript, what the LLM reads "
    "(the captions stay on --model's; words they committed stay); 'none' or 'off': --model's. Default: config "
    "chat.final_asr, else moonshine-base-en where it is this machine's default recognizer and chat runs "
    "moonshine-tiny-en: it hears a user who talks over the reply better.",
    autocompletion=complete_asr_model, show_default=False)]
OutputDeviceOpt = Annotated[Optional[str], typer.Option(
    "--device", "-d", help="Speaker: device index or name part (default: config devices.output; see `voxcli devices`).",
    autocompletion=complete_output_device, show_default=False)]
InputDeviceOpt = Annotated[Optional[str], typer.Option(
    "--device", "-d", help="Microphone: device index or name part (default: config devices.input; see `voxcli devices`).",
    autocompletion=complete_input_device, show_default=False)]
EndpointMsOpt = Annotated[Optional[int], typer.Option(
    "--endpoint-ms", min=ENDPOINT_MS_MIN, max=ENDPOINT_MS_MAX, show_default=False,
    help="Silence that ends an utterance, in ms (default: config asr.endpoint_ms, else 500).")]
OutputFileOpt = Annotated[Optional[Path], typer.Option(
    "--output", "-o", help="Write a .wav or .flac file (atomically) instead of playing.", show_default=False)]
StepMsOpt = Annotated[Optional[int], typer.Option("--step-ms", min=100, max=5000, help="Re-decode interval while speaking, ms (default: the model's own: 500, moonshine-base-en 750).", show_default=False)]
AgreementOpt = Annotated[Optional[int], typer.Option(
    "--agreement", min=1, max=5, show_default=False,
    help="Hypotheses that must agree before a word is stable, LocalAgreement n (default: the model's own: 2, moonshine-base-en 4).")]
SpeedOpt = Annotated[float, typer.Option(
    "--speed", min=0.0, help="Input pacing: 1 = real time, 4 = 4x, 0 = unpaced (lockstep).")]


def command_config() -> Any:
    """The config (env laid over the file) for one command, its warnings printed once on stderr."""
    from voxcli.cli.errors import err
    from voxcli.config import load_config

    cfg = load_config()
    for w in cfg.warnings:
        err(f"voxcli: warning: {w}")
    return cfg
