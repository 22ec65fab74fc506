"""`voxcli doctor`: check PortAudio, devices, espeak-ng, onnxruntime, config, cache, disk."""
from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from voxcli.cli.errors import STATE, err, guarded
from voxcli.cli.options import JsonOpt, OfflineOpt, QuietOpt, VerboseOpt, flag

HELP = """\
Check that this machine can speak and listen, and say what to fix.

Checks PortAudio, audio devices, echo cancellation (full-duplex `chat` on
speakers), the espeak-ng library, onnxruntime and its
providers, the config file, the model cache (re-hashes every installed model
against its recorded sha256), free disk space, and which installed speech
recognizers keep real time here (asr-tier: figures cached per machine;
--measure streams 12 s of speech through each, 10-40 s per model; live
means worker RTF <= 0.5). Exit status 1 if any check failed; warnings (e.g.
no sound card) do not fail. With --quiet only problems are printed.

[bold]Examples[/bold]

  voxcli doctor
  voxcli doctor --fix                  re-download broken models
  voxcli doctor --only asr-tier --measure   which ASR models run live here
  voxcli doctor --only cache --json    in CI: one JSON object per check
"""


def _check_names() -> list[str]:
    from voxcli.doctor import CHECKS

    return list(CHECKS)


def _complete_check(incomplete: str) -> list[str]:
    return [c for c in _check_names() if c.startswith(incomplete)]


@guarded
def doctor(
    fix: Annotated[bool, flag("--fix", help="Re-pull models whose files do not verify.")] = False,
    only: Annotated[Optional[list[str]], typer.Option(
        "--only", metavar="CHECK", show_default=False, autocompletion=_complete_check,
        help="Run only this check (repeatable): portaudio, devices, aec, espeak-ng, onnxruntime, config, cache, disk, "
             "tts-profile, asr-tier.")] = None,
    measure: Annotated[bool, flag(
        "--measure", help="Time each installed ASR model on this machine now (asr-tier; cached for next time).")] = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    offline: OfflineOpt = False,
) -> None:
    """Check this machine (the `voxcli doctor` command)."""
    from voxcli.cli.views.doctor import CheckView
    from voxcli.cli.views.progress import make_progress
    from voxcli.doctor import run_checks

    progress = make_progress(False, quiet or json_out) if fix else None  # stdout stays one object per check
    if measure and not (quiet or json_out) and (not only or "asr-tier" in only):
        err("asr-tier: timing each installed ASR model on this machine (10-40 s each) ...")
    try:
        results = run_checks(only, fix=fix, offline=STATE.offline, on_progress=progress,
                             on_result=CheckView(json_out=json_out, quiet=quiet), measure=measure)
    finally:
        close = getattr(progress, "close", None)
        if close:
            close()
    failed = [r.name for r in results if r.status == "fail"]
    if not json_out and not quiet:
        warned = sum(r.status == "warn" for r in results)
        err(f"{len(results)} checks: {len(failed)} failed, {warned} warning(s)")
    if failed:
        sys.stdout.flush()
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("doctor", help=HELP, short_help="Check audio, libraries and the model cache; say what to fix.")(doctor)
