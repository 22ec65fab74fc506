"""Is this file the one we expect? Size first (a `stat`), then sha256.

Every check of a model's bytes goes through here: a finished download, a
local archive given with `--sha256`, the staged files of a pull before they
are installed, a cached file whose mtime changed, and `voxcli doctor`.
Keeping one implementation means one wording and one rule: a size mismatch
is reported without hashing, and digests compare case-insensitively.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

from voxcli.errors import IntegrityError


def sha256_file(path: Path, on_chunk: Callable[[int], None] | None = None) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks (`on_chunk` gets each block's length)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(1 << 20):
            h.update(b)
            if on_chunk:
                on_chunk(len(b))
    return h.hexdigest()


def file_stamp(path: Path) -> list[int]:
    """[size, mtime_ns, ctime_ns, inode]: changes whenever the file is written, replaced or re-timed.

    Why ctime: `os.utime` can put an mtime back after an in-place write, but
    every write (and every utime) sets ctime to now. A file whose stamp is the
    one recorded when it was hashed is the file that was hashed, so a cold
    start need not read it again; bit rot below the file system is left to
    `voxcli doctor`, which re-hashes.
    """
    st = Path(path).stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def file_problem(path: Path, *, sha256: str | None = None, size: int | None = None,
                 name: str | None = None) -> tuple[str | None, str | None]:
    """(problem sentence or None, digest or None when the size was already wrong).

    `name` is how the sentence calls the file (its file name by default). The
    digest is computed even when no `sha256` is expected, so callers can
    record it.
    """
    name = name or path.name
    actual = path.stat().st_size
    if size is not None and actual != size:
        return f"{name} has {actual} bytes, expected {size}", None
    digest = sha256_file(path)
    if sha256 and digest != sha256.lower():
        return f"sha256 mismatch for {name} (expected {sha256.lower()}, got {digest})", digest
    return None, digest


def verify_file(path: Path, *, owner: str, sha256: str | None = None, size: int | None = None,
                name: str | None = None, hint: str | None = None) -> str:
    """The file's sha256 digest; IntegrityError("<owner>: <problem>") when size or digest differ."""
    problem, digest = file_problem(path, sha256=sha256, size=size, name=name)
    if problem is not None:
        raise IntegrityError(f"{owner}: {problem}",
                             hint=hint or "the source does not hold the expected file; nothing was installed")
    assert digest is not None
    return digest
