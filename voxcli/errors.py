"""One exception tree for the whole engine, mapped by the CLI to exit codes.

The engine raises these; only `voxcli.cli` turns them into a one-line
`voxcli: error: ...` message (plus an optional `hint:`) and an exit code, so a
library user can catch `VoxError` and never sees a typer or rich object.
"""
from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Documented process exit codes (README, man page)."""

    OK = 0
    ERROR = 1
    USAGE = 2
    MODEL_NOT_FOUND = 3
    INTEGRITY = 4
    DEVICE_UNAVAILABLE = 5
    INTERRUPTED = 130
    TERMINATED = 143
    """SIGTERM (128 + 15, what a shell reports for a process killed by it): same cleanup as Ctrl-C."""


class VoxError(Exception):
    """Base of every error voxcli raises on purpose.

    `hint` is a short suggestion printed on its own line by the CLI.
    """

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(VoxError):
    """Bad input from the user: empty text, unreadable audio, conflicting flags."""

    exit_code = ExitCode.USAGE


class ModelNotFoundError(VoxError):
    """A model name is unknown, or known but not installed while offline."""

    exit_code = ExitCode.MODEL_NOT_FOUND


class IntegrityError(VoxError):
    """A download or archive failed verification (sha256, size, unsafe member)."""

    exit_code = ExitCode.INTEGRITY


class DeviceUnavailableError(VoxError):
    """No audio device (speaker or microphone) can be opened."""

    exit_code = ExitCode.DEVICE_UNAVAILABLE


class FetchError(VoxError):
    """A download failed for a reason other than integrity (network, HTTP status)."""


class DiskFullError(VoxError):
    """The disk (or a file size limit) ran out while writing; partial files were removed."""


class OutputError(VoxError):
    """A file, directory or stream voxcli must write cannot be written (read-only, not a directory,
    a directory in the way): the environment's fault, not voxcli's, so one line and exit 1, never
    "internal error ... report it"."""


class LLMError(VoxError):
    """The language model server failed (unreachable, HTTP error, dropped stream)."""


class Cancelled(VoxError):
    """A stream was cancelled (Ctrl-C or `cancel()`)."""

    exit_code = ExitCode.INTERRUPTED
