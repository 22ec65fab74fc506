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

import errno
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

from voxcli.errors import (DeviceUnavailableError, ExitCode, IntegrityError, ModelNotFoundError, OutputError,
                           VoxError)

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
            if (known := environment_error(e)) is not None:
                report_error(known.message, known.hint)
                raise typer.Exit(int(known.exit_code)) from None
            report_error(f"internal error: {type(e).__name__}: {e}", "run with --debug for a traceback and report it")
            raise typer.Exit(int(ExitCode.ERROR)) from None

    return wrapper  # type: ignore[return-value]


_ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EACCES,
                                  errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR, errno.ENOENT,
                                  errno.ENAMETOOLONG, errno.ELOOP})
_DAMAGED_MODEL = frozenset({"DecodeError", "InvalidProtobuf", "InvalidGraph", "NoSuchFile"})
"""Class names of the protobuf / onnxruntime errors a truncated or corrupt model file raises on load."""
_LOAD_FAILURES = ("model verification failed", "Load model from", "Protobuf parsing failed")
"""onnxruntime's generic `Fail` with these words happened while loading a model file (not while running it)."""


def _under(name: object, root: os.PathLike[str] | str) -> bool:
    try:
        return os.path.commonpath([os.path.abspath(str(name)), os.path.abspath(root)]) == os.path.abspath(root)
    except ValueError:
        return False


def environment_error(e: BaseException) -> VoxError | None:
    """The one-line error for a failure of the machine, not of voxcli, that nobody mapped where it arose.

    Why: a cache under a read-only or missing directory, stdout on a full disk, a model file that
    vanished or rotted was reported as "internal error ... report it" (exit 1), which sends people
    to the bug tracker for their own disk. The cache and data directories get a hint naming the
    variable that moves them; a damaged model (protobuf/onnxruntime load errors) is exit 4.
    """
    kind = type(e)
    load_failure = kind.__name__ == "Fail" and any(m in str(e) for m in _LOAD_FAILURES)
    if ((kind.__name__ in _DAMAGED_MODEL or load_failure)
            and kind.__module__.split(".")[0] in ("onnxruntime", "google", "onnx")):
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else kind.__name__
        hint = "`voxcli doctor` finds it; reinstall the model with `voxcli pull --force NAME`"
        if kind.__name__ == "NoSuchFile":
            return ModelNotFoundError(f"a model file disappeared while loading ({first})", hint=hint)
        return IntegrityError(f"a model file is damaged and cannot be loaded ({first})", hint=hint)
    if not isinstance(e, OSError) or e.errno not in _ENVIRONMENT_ERRNOS:
        return None
    from voxcli import paths
    from voxcli.config import ENV_DATA_DIR, data_dir
    from voxcli.fsutil import write_error

    why = (e.strerror or str(e)).lower()
    for root, var, what in ((paths.cache_dir(), "VOXCLI_CACHE_DIR", "model cache"),
                            (data_dir(), ENV_DATA_DIR, "data directory")):
        if e.filename is not None and (_under(e.filename, root) or _under(root, e.filename)):
            return OutputError(f"the {what} {root} is not usable: {why} ({e.filename})",
                               hint=f"make it writable, or set {var} to a writable directory")
    if e.filename is None:
        return write_error(e, "stdout" if e.errno in (errno.ENOSPC, errno.EFBIG) else "the output")
    return OutputError(f"{e.filename}: {why}")


@contextmanager
def writing_stdout() -> Iterator[None]:
    """Map a failed write to stdout (`> /dev/full`, a full disk) to one line and exit 1; a closed pipe stays quiet."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as e:
        from voxcli.fsutil import write_error

        raise write_error(e, "stdout") from None


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
