"""Shared CLI plumbing: global state, error -> exit code mapping, --verbose logging, device hints.

Every command body runs inside `guarded()`, so a `VoxError` becomes one
`voxcli: error: ...` line (plus `hint: ...`) and its exit code, Ctrl-C becomes
exit 130, SIGTERM exit 143 and a closed stdout pipe ends quietly, whether the
app is run as the console script or through typer's CliRunner in tests.

SIGTERM takes the Ctrl-C path: `install_signal_handlers()` (called by the
console script, never at import) makes it raise `Terminated`, a
KeyboardInterrupt, in the main thread, so every `except KeyboardInterrupt` /
`finally` that cancels streams and removes temp files runs for both.
"""
from __future__ import annotations

import functools
from contextlib import contextmanager
import logging
import os
import signal
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypeVar

import typer

from voxcli.errors import DeviceUnavailableError, ExitCode, VoxError

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class GlobalOptions:
    """Options given before the subcommand (`voxcli --debug speak ...`)."""

    debug: bool = False
    offline: bool = False


STATE = GlobalOptions()


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so the same cleanup runs; the process exits 143."""


_received: list[int] = []
"""Signals delivered to this process: a C extension interrupted while importing turns the
KeyboardInterrupt into `ImportError: initialization failed`, which must still exit 130/143."""


def _on_signal(signum: int, frame: Any) -> None:
    _received.append(signum)
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def install_signal_handlers() -> None:
    """SIGTERM -> `Terminated`, SIGINT -> KeyboardInterrupt (as Python's own), both remembered.

    Only the console script calls this, in the main thread (a no-op elsewhere).
    """
    try:
        signal.signal(signal.SIGTERM, _on_signal)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _on_signal)
    except (ValueError, OSError, AttributeError):
        pass


def interrupt_exit_code(e: BaseException | None = None) -> ExitCode:
    """130 for Ctrl-C, 143 for SIGTERM (also when click wrapped it in Abort)."""
    while e is not None:
        if isinstance(e, Terminated):
            return ExitCode.TERMINATED
        e = e.__cause__ or e.__context__
    return ExitCode.TERMINATED if signal.SIGTERM in _received else ExitCode.INTERRUPTED


def _interrupted_exit(code: ExitCode) -> typer.Exit:
    err("voxcli: terminated" if code == ExitCode.TERMINATED else "voxcli: interrupted")
    return typer.Exit(int(code))


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time of the record (tests swap it)."""

    @property  # type: ignore[override]
    def stream(self):  # noqa: ANN201
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:  # noqa: ANN001
        pass


def log_to_stderr(level: int | None) -> None:
    """The engine logs through `logging` ("voxcli.*"); --verbose shows it as plain stderr lines.

    Called by the global callback on every invocation (an earlier in-process
    run must not leak its level) and by `--verbose` given after a subcommand.
    """
    logger = logging.getLogger("voxcli")
    for h in [h for h in logger.handlers if getattr(h, "_voxcli_cli", False)]:
        logger.removeHandler(h)
    if level is None:
        logger.setLevel(logging.NOTSET)
        return
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("voxcli: %(message)s"))
    handler._voxcli_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level)


def err(message: str) -> None:
    """Write a human line to stderr (never stdout: stdout is for data)."""
    print(message, file=sys.stderr, flush=True)


def report_error(message: str, hint: str | None = None) -> None:
    err(f"voxcli: error: {message}")
    if hint:
        err(f"hint: {hint}")


_pipe_closed: list[bool] = []


def stdout_was_closed() -> bool:
    """True after a command ended quietly because its reader closed stdout (`| head`)."""
    return bool(_pipe_closed)


def quiet_broken_pipe() -> None:
    """After a BrokenPipeError on stdout (`| head`): end quietly, with no second error at interpreter exit."""
    # Point stdout at devnull so the interpreter's final flush cannot raise again.
    _pipe_closed.append(True)
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def guarded(fn: F) -> F:
    """Decorator for command bodies: map exceptions to one line and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except VoxError as e:
            if STATE.debug:
                traceback.print_exc()
            report_error(e.message, e.hint)
            raise typer.Exit(int(e.exit_code)) from None
        except KeyboardInterrupt as e:
            raise _interrupted_exit(interrupt_exit_code(e)) from None
        except BrokenPipeError:
            quiet_broken_pipe()
            raise typer.Exit(0) from None
        except Exception as e:  # noqa: BLE001 - the last line of defence
            if _received:  # a signal surfaced as another exception (e.g. inside a C extension's import)
                raise _interrupted_exit(interrupt_exit_code(e)) from None
            if STATE.debug:
                traceback.print_exc()
            report_error(f"internal error: {type(e).__name__}: {e}", "run with --debug for a traceback and report it")
            raise typer.Exit(int(ExitCode.ERROR)) from None

    return wrapper  # type: ignore[return-value]


DEVICE_HINTS: dict[str, str] = {
    "speak": "write the audio instead: -o out.wav or --raw (or pick a --device, see `voxcli devices`)",
    "transcribe": "transcribe a file instead: voxcli transcribe FILE (or raw PCM on stdin: "
                  "... | voxcli transcribe -); or pick a --device, see `voxcli devices`",
    "chat": "chat from files instead: voxcli chat --input q.wav -o replies.wav "
            "(or pick a --device, see `voxcli devices`)",
    "devices": "without audio devices: voxcli speak -o out.wav, voxcli transcribe FILE, voxcli chat --input q.wav",
}
"""What each command can do without the speaker/microphone it failed to open.

The engine's DeviceUnavailableError carries a generic hint (it does not know
which command runs); `transcribe --live` used to suggest speak's `-o out.wav
or --raw`.
"""


@contextmanager
def device_hint(command: str) -> Iterator[None]:
    """Give a DeviceUnavailableError raised inside the block the hint that fits `command`."""
    try:
        yield
    except DeviceUnavailableError as e:
        e.hint = DEVICE_HINTS.get(command, e.hint)
        raise
