"""Resumable downloads, verification and safe extraction.

Downloads follow huggingface_hub's `_download_to_tmp_and_move` recipe: a
partial file keyed by what is being downloaded (held under a file lock, so
only one live process writes it), `Range` requests to resume after a dropped
connection (within the retry loop, and in a later run), sha256 verified
before anything is extracted. Archives are extracted member by member with
the checks tarfile's `data` filter makes: no absolute paths, no `..`, no
links or devices, so a hostile archive cannot write outside the staging dir.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tarfile
import time
import zipfile
from pathlib import Path, PurePosixPath
from typing import Callable, Final

from filelock import FileLock

from voxcli.errors import FetchError, IntegrityError
from voxcli.events import Progress

ProgressFn = Callable[[Progress], None]
CHUNK: Final = 1 << 16
RETRIES: Final = 4
ARCHIVE_SUFFIXES: Final = (".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar", ".zip", ".whl")


def _noop(_: Progress) -> None:
    pass


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


def list_archive(archive: Path) -> list[str]:
    """Regular-file members of an archive, after checking every member is safe."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                _check_zip_member(info)
            return [i.filename for i in z.infolist() if not i.is_dir()]
    try:
        with tarfile.open(archive) as t:
            members = t.getmembers()
    except (tarfile.TarError, OSError) as e:
        raise IntegrityError(f"{archive.name}: not a readable archive ({e})") from None
    for m in members:
        _check_tar_member(m)
    return [m.name for m in members if m.isfile()]


def extract_members(
    archive: Path,
    members: dict[str, str],
    target: Path,
    *,
    model: str = "",
    on_progress: ProgressFn = _noop,
) -> None:
    """Extract archive members to flat file names in `target`.

    `members` maps output file name -> member path. Every member of the
    archive is checked first (not only the wanted ones), so a hostile archive
    is refused as a whole and nothing is written.
    """
    names = set(list_archive(archive))
    missing = [m for m in members.values() if m not in names]
    if missing:
        raise IntegrityError(f"{archive.name}: missing expected member(s) {', '.join(missing)}")
    total = len(members)
    on_progress(Progress("extract", 0, total, model, archive.name))
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            for i, (out, member) in enumerate(members.items(), 1):
                dest = target / _safe_relpath(out)
                dest.parent.mkdir(parents=True, exist_ok=True)
                with z.open(member) as src, open(dest, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
                on_progress(Progress("extract", i, total, model, out))
        return
    with tarfile.open(archive) as t:
        for i, (out, member) in enumerate(members.items(), 1):
            info = t.getmember(member)
            _check_tar_member(info)
            src = t.extractfile(info)
            if src is None:
                raise IntegrityError(f"{archive.name}: {member} is not a regular file")
            dest = target / _safe_relpath(out)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with src, open(dest, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            on_progress(Progress("extract", i, total, model, out))
