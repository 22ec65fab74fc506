"""The `voxcli` typer app: global options and the list of subcommands.

Subcommands live in their own modules as importable functions (e.g.
`voxcli.cli.speak.speak`); each module's `register(app)` adds them. This
module only wires them up and maps failures to exit codes (see `errors`).

A run builds only the subcommand it names (`COMMANDS`, `modules_for`): a
cold `speak --raw` must not import and convert eleven commands to use one
(issue 15). `voxcli --help`, completion, an unknown command and importers
of `app` (tests, scripts/gen_man.py) get every command.
"""
from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import TYPE_CHECKING, Annotated, Any, Iterable, Optional, Sequence

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
from voxcli.cli.coercion import install as install_fast_coercion
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

# Each subcommand and the module under voxcli.cli whose `register(app)` adds it, in help order.
COMMANDS = {
    "speak": "speak",
    "transcribe": "transcribe",
    "devices": "devices",
    "pull": "pull",
    "models": "pull",
    "rm": "pull",
    "ledger": "ledger",
    "bench": "bench",
    "chat": "chat",
    "config": "config_cmd",
    "doctor": "doctor",
}
COMMAND_MODULES = list(dict.fromkeys(COMMANDS.values()))
_GLOBAL_FLAGS = frozenset({"--debug", "--verbose", "-v", "--offline"})
"""The root options that may come before the subcommand's name (none of them takes a value)."""


def _version(value: bool) -> None:
    if value:
        print(f"voxcli {__version__}")
        raise typer.Exit()


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
    from voxcli.hub.download import set_progress_hook  # not hub.pull: a start that pulls nothing skips it

    # A model pulled on first use (not via `voxcli pull`) shows progress on stderr.
    set_progress_hook(LazyProgress())


patch_help_rendering()  # option help is literal text; flags show no `<bool>`


def _first_sentence(text: str | None) -> str | None:
    if not text:
        return None
    para = " ".join(text.strip().split("\n\n")[0].split())
    end = para.find(". ")
    return (para[: end + 1] if end > 0 else para).rstrip(":")


def _default_short_help(cli: typer.Typer) -> None:
    """`voxcli --help` lists every subcommand on one line: default the short help
    to the first sentence of the long help when a command did not set one."""
    for cmd in cli.registered_commands:
        if not cmd.short_help:
            cmd.short_help = _first_sentence(cmd.help or (cmd.callback.__doc__ if cmd.callback else None))
    for grp in cli.registered_groups:
        info = grp.typer_instance.info if grp.typer_instance else None
        if not grp.short_help and info is not None and not info.short_help:
            grp.short_help = _first_sentence(
                grp.help if isinstance(grp.help, str) else info.help if isinstance(info.help, str) else None)


def build_app(modules: Iterable[str] = COMMAND_MODULES) -> typer.Typer:
    """The typer app with the subcommands of `modules` (every one by default).

    `main` builds only the invoked subcommand's module: importing every command
    module and having typer convert every option of every command cost ~40 ms
    of each start (issue 15, cold start). Importers of `app` get the whole CLI.
    """
    cli = typer.Typer(
        name="voxcli",
        help=HELP,
        no_args_is_help=True,
        rich_markup_mode="rich",
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
        add_completion=True,
    )
    install_fast_coercion()  # plain option values without importing pydantic (cli/coercion.py)
    cli.callback()(_global)
    for name in modules:
        importlib.import_module(f"voxcli.cli.{name}").register(cli)
    _default_short_help(cli)
    return cli


def modules_for(args: Sequence[str]) -> list[str]:
    """The command modules a command line needs: the named subcommand's, else all of them
    (help, --version, completion, no or an unknown subcommand: every command must be there)."""
    if "_VOXCLI_COMPLETE" in os.environ:  # a Tab: typer reads the words from the environment
        return COMMAND_MODULES
    for arg in args:
        if arg not in _GLOBAL_FLAGS:
            return [COMMANDS[arg]] if arg in COMMANDS else COMMAND_MODULES
    return COMMAND_MODULES


if TYPE_CHECKING:
    app: typer.Typer


def __getattr__(name: str) -> Any:
    """`from voxcli.cli.app import app`: the whole CLI (tests, man page), built on first use."""
    if name == "app":
        cli = globals()["app"] = build_app()
        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


def _one_blas_thread(modules: list[str]) -> None:
    """`speak`: numpy's OpenBLAS on one thread, unless the user chose a thread count.

    Why (issue 15): OpenBLAS starts a worker at numpy's import that spins a whole
    core for ~100 ms, exactly while the voice's sessions load on both cores and
    the first block is computed; speak does no BLAS work that threads would speed
    up. Set before numpy is imported (it reads the variable once); other commands
    are left as they were.
    """
    if modules == ["speak"] and "numpy" not in sys.modules and not (
            os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    install_signal_handlers()
    try:
        modules = modules_for(sys.argv[1:] if argv is None else argv)
        _one_blas_thread(modules)
        cli = build_app(modules)
        rv = cli(args=argv, prog_name="voxcli", standalone_mode=False)
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
