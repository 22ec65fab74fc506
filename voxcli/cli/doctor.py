"""`voxcli doctor`: check PortAudio, devices, espeak-ng, onnxruntime, config, cache, disk."""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Annotated, Optional

import typer

from voxcli.cli.errors import STATE, err, guarded

HELP = """\
Check that this machine can speak and listen, and say what to fix.

Checks PortAudio, audio devices, the espeak-ng library, onnxruntime and its
providers, the config file, the model cache (re-hashes every installed model
against its recorded sha256) and free disk space. Exit status 1 if any check
failed; warnings (e.g. no sound card) do not fail.

[bold]Examples[/bold]

  voxcli doctor
  voxcli doctor --fix                  re-download broken models
  voxcli doctor --only cache --json    in CI: one JSON object per check
"""

_MARK = {"ok": "ok", "warn": "WARN", "fail": "FAIL"}
_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


def register(app: typer.Typer) -> None:
    @app.command("doctor", help=HELP, short_help="Check audio, libraries and the model cache; say what to fix.")
    @guarded
    def doctor_cmd(
        fix: Annotated[bool, typer.Option("--fix", help="Re-pull models whose files do not verify.")] = False,
        only: Annotated[Optional[list[str]], typer.Option(
            "--only", metavar="CHECK",
            help="Run only this check (repeatable): portaudio, devices, espeak-ng, onnxruntime, config, cache, disk.",
            autocompletion=lambda incomplete: [c for c in _check_names() if c.startswith(incomplete)])] = None,
        json_out: Annotated[bool, typer.Option("--json", help="One JSON object per check on stdout (JSON lines).")] = False,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only problems.")] = False,
    ) -> None:
        from voxcli.cli.views.progress import fancy_terminal, make_progress
        from voxcli.doctor import run_checks

        fancy = fancy_terminal() and not json_out
        console = None
        if fancy:
            from rich.console import Console

            console = Console(stderr=True, highlight=False)

        def show(r) -> None:
            if json_out:
                print(json.dumps(asdict(r)), flush=True)
                return
            if quiet and r.status == "ok":
                return
            if console is not None:
                from rich.markup import escape

                console.print(f"[{_STYLE[r.status]}]{_MARK[r.status]:>4}[/] [bold]{r.name:<11}[/] {escape(r.summary)}")
                if r.fix:
                    console.print(f"{'':>4} {'':<11} [dim]fix:[/] {escape(r.fix)}")
            else:
                err(f"{_MARK[r.status]:>4} {r.name:<11} {r.summary}")
                if r.fix:
                    err(f"{'':>4} {'':<11} fix: {r.fix}")

        progress = make_progress(False, quiet or json_out) if fix else None  # stdout stays one object per check
        try:
            results = run_checks(only, fix=fix, offline=STATE.offline, on_progress=progress, on_result=show)
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


def _check_names() -> list[str]:
    from voxcli.doctor import CHECKS

    return list(CHECKS)
