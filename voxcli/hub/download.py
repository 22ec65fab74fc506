"""Resumable downloads, verification and safe extraction.

Downloads follow huggingface_hub's `_download_to_tmp_and_move` recipe: a
partial file keyed by what is being downloaded (held under a file lock, so
only one live process writes it), `Range` requests to resume after a dropped
connection (within the retry loop, and in a later run), sha256 verified
before anything is extracted. Archives are extracted member by member with
the checks tarfile's `data` filter makes: no absolute paths, no `..`, no
links or devices, so a hostile archive cannot write outside the staging dir,
and the bytes it may expand to are capped (the catalog's sizes, or
$VOXCLI_MAX_EXTRACT_BYTES for ad-hoc archives), so a decompression bomb
cannot fill the disk. A full disk (ENOSPC, EDQUOT, or EFBIG from a file size
limit) becomes one `DiskFullError` line and the partial file is removed.
"""
from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
import tarfile
import time
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Callable, Final

from filelock import FileLock

from voxcli.errors import DiskFullError, FetchError, IntegrityError
from voxcli.events import Progress

ProgressFn = Callable[[Progress], None]
_LOG = logging.getLogger(__name__)
CHUNK: Final = 1 << 16
RETRIES: Final = 4
ARCHIVE_SUFFIXES: Final = (".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar", ".zip", ".whl")


def _noop(_: Progress) -> None:
    pass


_DISK_FULL: Final = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


def disk_full(e: BaseException, where: Path | str) -> DiskFullError | None:
    """The one-line error for an OSError that means "no room to write", else None."""
    if not isinstance(e, OSError) or e.errno not in _DISK_FULL:
        return None
    reason = {errno.EFBIG: "file too large (a file size limit was reached)"}.get(e.errno, "no space left on the disk")
    return DiskFullError(
        f"cannot write {where}: {reason}",
        hint="free some space (or set VOXCLI_CACHE_DIR to a bigger disk) and run the same command again",
    )


def sha256_file(path: Path, on_chunk: Callable[[int], None] | None = None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
            if on_chunk:
                on_chunk(len(b))
    return h.hexdigest()


def is_archive(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def http_client(timeout: float = 30.0):  # -> httpx.Client, imported lazily
    import httpx

    from voxcli import __version__

    return httpx.Client(
        follow_redirects=True,
        timeout=httpx.Timeout(timeout, connect=10.0),
        headers={"User-Agent": f"voxcli/{__version__}"},
    )


def download(
    url: str,
    dest: Path,
    *,
    key: str,
    downloads_dir: Path,
    sha256: str | None = None,
    size: int | None = None,
    model: str = "",
    on_progress: ProgressFn = _noop,
    client=None,
) -> Path:
    """Download `url` to `dest` (verified), resuming a partial `<key>.part`.

    Raises IntegrityError when the digest or size is wrong (the partial file
    is deleted, so the next try starts clean) and FetchError for network or
    HTTP failures (the partial file is kept for resume).
    """
    import httpx

    part = downloads_dir / f"{key}.part"
    own_client = client is None
    client = client or http_client()
    try:
        with FileLock(str(part) + ".lock"):
            last_error: Exception | None = None
            for attempt in range(RETRIES):
                have = part.stat().st_size if part.exists() else 0
                headers = {"Range": f"bytes={have}-"} if have else {}
                _LOG.info("GET %s%s", url, f" (resuming at byte {have})" if have else "")
                try:
                    with client.stream("GET", url, headers=headers) as r:
                        if r.status_code == 416 and have:  # already complete (or bigger than the file)
                            break
                        if r.status_code >= 400:
                            raise FetchError(f"{url}: HTTP {r.status_code} {r.reason_phrase}".rstrip())
                        if r.status_code != 206:
                            have = 0  # server ignored Range: start over
                        total = size
                        if total is None:
                            length = r.headers.get("content-length")
                            total = have + int(length) if length and length.isdigit() else None
                        with open(part, "ab" if have else "wb") as f:
                            done = have
                            on_progress(Progress("download", done, total, model, url))
                            last_emit = 0.0
                            for b in r.iter_bytes():  # no re-chunking: keep every byte that arrived before a drop
                                f.write(b)
                                done += len(b)
                                now = time.monotonic()
                                if now - last_emit > 0.1:
                                    on_progress(Progress("download", done, total, model, url))
                                    last_emit = now
                            on_progress(Progress("download", done, total, model, url))
                    if size is not None and part.stat().st_size < size:
                        raise httpx.RemoteProtocolError("connection closed before the end of the file")
                    break
                except (httpx.TransportError, httpx.StreamError) as e:
                    last_error = e
                    time.sleep(min(0.2 * 2**attempt, 2.0))
                except OSError as e:
                    full = disk_full(e, part)
                    if full is None:
                        raise
                    part.unlink(missing_ok=True)  # give the space back; there is nothing to resume into
                    raise full from None
            else:
                raise FetchError(
                    f"{url}: download failed after {RETRIES} tries ({last_error})",
                    hint="check the network and run the same pull again: it resumes where it stopped",
                )
            got_size = part.stat().st_size
            if size is not None and got_size != size:
                part.unlink(missing_ok=True)
                raise IntegrityError(f"{url}: size mismatch (expected {size} bytes, got {got_size})")
            if sha256:
                on_progress(Progress("verify", 0, got_size, model, url))
                digest = sha256_file(part)
                on_progress(Progress("verify", got_size, got_size, model, url))
                if digest != sha256.lower():
                    part.unlink(missing_ok=True)
                    raise IntegrityError(
                        f"{url}: sha256 mismatch (expected {sha256.lower()}, got {digest})",
                        hint="the file on the server is not the one the catalog names; nothing was installed",
                    )
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(part, dest)
    except httpx.InvalidURL as e:
        raise FetchError(f"{url}: invalid URL ({e})") from None
    finally:
        if own_client:
            client.close()
    return dest


# ---------------------------------------------------------------- extraction

def _safe_relpath(name: str) -> PurePosixPath:
    p = PurePosixPath(name.replace("\\", "/"))
    if p.is_absolute() or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise IntegrityError(f"unsafe archive member {name!r}: absolute path")
    if any(part == ".." for part in p.parts):
        raise IntegrityError(f"unsafe archive member {name!r}: path leaves the target directory")
    return p


def _check_tar_member(m: tarfile.TarInfo) -> None:
    _safe_relpath(m.name)
    if m.issym() or m.islnk():
        raise IntegrityError(f"unsafe archive member {m.name!r}: link to {m.linkname!r}")
    if not (m.isfile() or m.isdir()):
        raise IntegrityError(f"unsafe archive member {m.name!r}: not a regular file")


def _check_zip_member(info: zipfile.ZipInfo) -> None:
    _safe_relpath(info.filename)
    mode = info.external_attr >> 16
    if mode and stat.S_ISLNK(mode):
        raise IntegrityError(f"unsafe archive member {info.filename!r}: symbolic link")
    if mode and stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise IntegrityError(f"unsafe archive member {info.filename!r}: not a regular file")


def _too_big(archive: Path, total: int, limit: int) -> IntegrityError:
    return IntegrityError(
        f"{archive.name}: expands to more than {limit} bytes ({total} or more): refused as a decompression bomb",
        hint="if the archive is genuine, raise the limit with VOXCLI_MAX_EXTRACT_BYTES",
    )


def list_archive(archive: Path, max_bytes: int | None = None) -> list[str]:
    """Regular-file members of an archive, after checking every member is safe.

    With `max_bytes`, the declared sizes of all regular members must not add
    up to more (tar headers are read lazily, so a bomb is refused at the
    member that crosses the limit, before its data is decompressed).
    """
    if zipfile.is_zipfile(archive):
        try:
            with zipfile.ZipFile(archive) as z:
                infos = z.infolist()
        except (zipfile.BadZipFile, OSError, ValueError) as e:
            raise IntegrityError(f"{archive.name}: not a readable archive ({e})") from None
        total = 0
        for info in infos:
            _check_zip_member(info)
            total += 0 if info.is_dir() else info.file_size
            if max_bytes is not None and total > max_bytes:
                raise _too_big(archive, total, max_bytes)
        return [i.filename for i in infos if not i.is_dir()]
    names: list[str] = []
    total = 0
    try:
        with tarfile.open(archive) as t:
            for m in t:
                _check_tar_member(m)
                if m.isfile():
                    names.append(m.name)
                    total += m.size
                    if max_bytes is not None and total > max_bytes:
                        raise _too_big(archive, total, max_bytes)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        raise IntegrityError(f"{archive.name}: not a readable archive ({e})") from None
    return names


def _copy_at_most(src, dst, limit: int, archive: Path) -> int:
    """Copy, refusing to write more than `limit` bytes (a header that lies about its size)."""
    n = 0
    while b := src.read(1 << 20):
        n += len(b)
        if n > limit:
            raise _too_big(archive, n, limit)
        dst.write(b)
    return n


def extract_members(
    archive: Path,
    members: dict[str, str],
    target: Path,
    *,
    model: str = "",
    on_progress: ProgressFn = _noop,
    max_bytes: int | None = None,
) -> None:
    """Extract archive members to flat file names in `target`.

    `members` maps output file name -> member path. Every member of the
    archive is checked first (not only the wanted ones), so a hostile archive
    is refused as a whole and nothing is written. The wanted members may add
    up to at most `max_bytes` (declared sizes checked first, bytes counted
    while copying); a full disk raises DiskFullError with the partial file gone.
    """
    names = set(list_archive(archive))
    missing = [m for m in members.values() if m not in names]
    if missing:
        raise IntegrityError(f"{archive.name}: missing expected member(s) {', '.join(missing)}")
    total = len(members)
    budget = max_bytes if max_bytes is not None else 1 << 62
    on_progress(Progress("extract", 0, total, model, archive.name))
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            declared = sum(z.getinfo(m).file_size for m in members.values())
            if declared > budget:
                raise _too_big(archive, declared, budget)
            for i, (out, member) in enumerate(members.items(), 1):
                dest = target / _safe_relpath(out)
                dest.parent.mkdir(parents=True, exist_ok=True)
                with z.open(member) as src:
                    budget -= _write_member(src, dest, budget, archive)
                on_progress(Progress("extract", i, total, model, out))
        return
    with tarfile.open(archive) as t:
        infos = {m: t.getmember(m) for m in members.values()}
        declared = sum(info.size for info in infos.values())
        if declared > budget:
            raise _too_big(archive, declared, budget)
        for i, (out, member) in enumerate(members.items(), 1):
            info = infos[member]
            _check_tar_member(info)
            src = t.extractfile(info)
            if src is None:
                raise IntegrityError(f"{archive.name}: {member} is not a regular file")
            dest = target / _safe_relpath(out)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with src:
                budget -= _write_member(src, dest, budget, archive)
            on_progress(Progress("extract", i, total, model, out))


def _write_member(src, dest: Path, budget: int, archive: Path) -> int:
    try:
        with open(dest, "wb") as dst:
            return _copy_at_most(src, dst, budget, archive)
    except BaseException as e:
        dest.unlink(missing_ok=True)
        full = disk_full(e, dest)
        if full is not None:
            raise full from None
        raise
