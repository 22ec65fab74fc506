"""The `voxcli` typer app: global options and the list of subcommands.

Subcommands live in their own modules as importable functions (e.g.
`voxcli.cli.speak.speak`); each module's `register(app)` adds them. This
module only wires them up and maps failures to exit codes (see `errors`).
"""
from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Annotated, Optional

import typer

from voxcli import __version__
from voxcli.cli.errors import (
    STATE,
    install_signal_handlers,
    interrupt_exit_code,
    log_to_stderr,
    report_error,
    stdout_was_closed,
)
from voxcli.cli.options import OfflineOpt, VerboseOpt, flag
from voxcli.cli.views.help import patch_help_rendering
from voxcli.errors import ExitCode

try:  # typer >= 0.26 vendors its own copy of click
    from typer._click import exceptions as _cx
except ImportError:  # pragma: no cover
    from click import exceptions as _cx

HELP = """\
On-device streaming speech: speak text while it is still arriving, transcribe
speech while it is still being spoken. No cloud, no GPU.

[bold]Examples[/bold]

  voxcli speak "Hello there. This is voxcli."          speak on the speaker
  voxcli speak "Hello." -o hello.wav                   write a WAV file
  some-llm | voxcli speak - --raw | aplay -r 22050 -f S16_LE
  voxcli transcribe meeting.wav                        print a transcript
  voxcli transcribe --live                             live captions from the mic
  voxcli pull --defaults                               install the default models
"""

app = typer.Typer(
    name="voxcli",
    help=HELP,
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=True,
)

# Modules under voxcli.cli that define `register(app)`, in help order.
COMMAND_MODULES = [
    "speak",
    "transcribe",
    "devices",
    "pull",
    "ledger",
    "bench",
    "chat",
    "config_cmd",
    "doctor",
]




def _version(value: bool) -> None:
    if value:
        print(f"voxcli {__version__}")
        raise typer.Exit()


@app.callback()
def _global(
    version: Annotated[
        Optional[bool],
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = None,
    debug: Annotated[bool, flag("--debug", help="Show tracebacks for errors (and debug logs).")] = False,
    verbose: VerboseOpt = False,
    offline: OfflineOpt = False,
) -> None:
    """Global options; --verbose and --offline are also accepted after the subcommand (cli/options.py)."""
    STATE.debug = debug
    STATE.offline = offline  # (the option's callback also sets VOXCLI_OFFLINE, which the engine reads)
    # Set every time: an earlier in-process invocation (tests, embedding) must not leak its level.
    log_to_stderr(logging.DEBUG if debug else logging.INFO if verbose else None)
    from voxcli.cli.views.progress import LazyProgress
    from voxcli.hub.pull import set_progress_hook

    # A model pulled on first use (not via `voxcli pull`) shows progress on stderr.
    set_progress_hook(LazyProgress())


patch_help_rendering()  # option help is literal text; flags show no `<bool>`
for _name in COMMAND_MODULES:
    importlib.import_module(f"voxcli.cli.{_name}").register(app)


def _first_sentence(text: str | None) -> str | None:
    if not text:
        return None
    para = " ".join(text.strip().split("\n\n")[0].split())
    end = para.find(". ")
    return (para[: end + 1] if end > 0 else para).rstrip(":")


# `voxcli --help` lists every subcommand on one line: default the short help
# to the first sentence of the long help when a command did not set one.
for _cmd in app.registered_commands:
    if not _cmd.short_help:
        _cmd.short_help = _first_sentence(_cmd.help or (_cmd.callback.__doc__ if _cmd.callback else None))
for _grp in app.registered_groups:
    _info = _grp.typer_instance.info if _grp.typer_instance else None
    if not _grp.short_help and _info is not None and not _info.short_help:
        _grp.short_help = _first_sentence(_grp.help if isinstance(_grp.help, str) else _info.help if isinstance(_info.help, str) else None)


def _exit(code: int) -> None:
    """Exit; after Ctrl-C/SIGTERM or a closed stdout pipe, skip interpreter finalization.

    The command has already cancelled its streams and removed its temp files
    (or, for `| head`, abandoned work nobody will read). What can remain is a
    daemon thread blocked in C (a read on stdin, an onnxruntime call):
    finalizing around it can abort the process (SIGABRT, "could not acquire
    lock for <stdin>", "terminate called without an active exception")
    instead of exiting 130/143/0.
    """
    if code in (ExitCode.INTERRUPTED, ExitCode.TERMINATED) or (code == 0 and stdout_was_closed()):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    install_signal_handlers()
    try:
        rv = app(args=argv, prog_name="voxcli", standalone_mode=False)
    except typer.Exit as e:
        _exit(e.exit_code)
    except typer.Abort as e:  # click turns a KeyboardInterrupt outside a command body into Abort
        _exit(int(interrupt_exit_code(e)))
    except _cx.ClickException as e:
        if type(e).__name__ == "NoArgsIsHelpError":
            e.show()  # `voxcli` alone prints the help
            sys.exit(int(ExitCode.USAGE))
        ctx = getattr(e, "ctx", None)
        where = f"`{ctx.command_path} --help`" if ctx is not None else "`voxcli --help`"
        report_error(e.format_message(), f"see {where}" if e.exit_code == 2 else None)
        sys.exit(e.exit_code)
    except KeyboardInterrupt as e:
        _exit(int(interrupt_exit_code(e)))
    _exit(rv if isinstance(rv, int) else 0)  # click returns a command's typer.Exit code here
