"""The two ways voxcli writes files: atomically replaced, or appended line by line.

Atomic (`atomic_write`, `atomic_path`, `AtomicTarget`): the content goes to a
process-unique temp file in the destination's directory (same filesystem, so
`os.replace` is atomic) and only moves into place once complete; a crash or an
exception leaves the old file (or nothing) and no temp behind. `durable=True`
also fsyncs the file before the rename and the directory after it, so a power
cut cannot leave an empty file under the final name (ext4's delayed allocation
otherwise can). The file gets the mode a plain `open()` would give it (0o666
minus the umask), not mkstemp's 0600, because caches and outputs may be shared.
This is the ONE implementation; configs, manifests, derived graphs and audio
outputs all use it, so they all have the same durability.

Append-only JSON lines (bench history, chat turn log): one `os.write` of a whole
line on an O_APPEND descriptor, so two processes appending at once never
interleave inside a line, and a crash can at worst leave one torn last line,
which the reader skips.
"""
from __future__ import annotations

import errno
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Final, Iterator

from voxcli.errors import DiskFullError, OutputError, VoxError

DISK_FULL_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)})
"""Write failures that mean "no room": the disk, a quota, or a file size limit (ulimit -f)."""


def write_error(e: OSError, target: str | os.PathLike[str]) -> VoxError:
    """The one-line error for an OSError raised while writing `target` (a path, or "stdout").

    Why: a full disk, a read-only directory or a directory in the way is the
    environment, not a bug; without this mapping the CLI called them "internal
    error ... report it". A full disk or size limit is a DiskFullError, the rest
    an OutputError; both exit 1 with the cause and the path.
    """
    if e.errno in DISK_FULL_ERRNOS:
        why = ("a file size limit was reached (ulimit -f)" if e.errno == errno.EFBIG
               else "no space left on the device")
        hint = "raise the limit, or write less" if e.errno == errno.EFBIG else "free some space, or write somewhere else"
        return DiskFullError(f"cannot write {target}: {why}", hint=hint)
    why = (e.strerror or str(e)).lower()
    parent = Path(target).parent
    if e.errno == errno.ENOENT and target != "stdout" and parent.is_dir():
        why = f"{parent} does not accept new files"  # /proc, /sys: the directory exists, creating fails
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = "choose a writable location"
    else:
        hint = None
    where = f" ({e.filename})" if e.filename and str(e.filename) != str(target) else ""
    return OutputError(f"cannot write {target}: {why}{where}", hint=hint)


def umask() -> int:
    """The process umask, read without changing it where the OS allows (other threads may be creating files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` survive a power cut; a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems (and Windows) refuse fsync on a directory; the rename itself already happened
    finally:
        os.close(fd)


class AtomicTarget:
    """A temp sibling of `path` that becomes `path` on `commit()` and vanishes on `discard()`.

    For writers whose lifetime is not one `with` block (an audio file fed chunk
    by chunk by a stream); everyone else uses `atomic_path` or `atomic_write`.
    """

    def __init__(self, path: str | os.PathLike[str], *, durable: bool = True) -> None:
        self.path = Path(path)
        self.durable = durable
        parent = self.path.parent if str(self.path.parent) else Path(".")
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=parent)
        os.close(fd)
        self.tmp = Path(tmp)
        self.done = False

    def commit(self) -> Path:
        """Move the (closed) temp file onto `path`; idempotent. Returns `path`."""
        if self.done:
            return self.path
        try:
            if self.durable:
                fd = os.open(self.tmp, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            os.chmod(self.tmp, 0o666 & ~umask())
            os.replace(self.tmp, self.path)
        except BaseException:
            self.discard()
            raise
        self.done = True
        if self.durable:
            _fsync_dir(self.tmp.parent)
        return self.path

    def discard(self) -> None:
        """Remove the temp file; the destination is untouched. Idempotent."""
        if not self.done:
            self.tmp.unlink(missing_ok=True)
            self.done = True


@contextmanager
def atomic_path(path: str | os.PathLike[str], *, durable: bool = True) -> Iterator[Path]:
    """Yield a temp path next to `path`; write it (and close it) inside the block.

    On normal exit it replaces `path`; on an exception it is removed and the
    exception propagates. For writers that want a file name (onnx.save,
    soundfile, tomlkit dumps into an open file).
    """
    target = AtomicTarget(path, durable=durable)
    try:
        yield target.tmp
    except BaseException:
        target.discard()
        raise
    target.commit()


def atomic_write(path: str | os.PathLike[str], data: bytes | str, *, durable: bool = True) -> None:
    """Replace `path` with `data` (str is written as UTF-8) so readers see the old or the new content, never a mix."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_path(path, durable=durable) as tmp:
        with open(tmp, "wb") as f:
            f.write(raw)


def append_line(path: Path, line: str, mode: int = 0o644) -> Path:
    """Append one line (newline added) in a single write; creates the file and its directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return path


def read_records(path: Path, keep: Callable[[dict[str, Any]], bool], last: int | None = None) -> list[dict[str, Any]]:
    """The JSON objects of the file that `keep` accepts, oldest first; torn or foreign lines skipped."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and keep(obj):
            out.append(obj)
    return out[-last:] if last else out
