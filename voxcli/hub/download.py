"""Resumable downloads, verified, pinned to one version (safe extraction is in `hub.archive`).

Downloads follow huggingface_hub's `_download_to_tmp_and_move` recipe: a
partial file keyed by what is being downloaded (held under a file lock, so
only one live process writes it), `Range` requests to resume after a dropped
connection (within the retry loop, and in a later run), sha256 verified
before anything is extracted (`verify.verify_file`). A resume is pinned
with `If-Range` to the version the download started with (`hub.resume`), so
a file that changed on the server is fetched whole, never spliced. A redirect
loop or an undecodable body is a FetchError (a catalog pull tries its next
source). A full disk (ENOSPC, EDQUOT, or EFBIG from a file size
limit) becomes one `DiskFullError` line and the partial file is removed.
"""
from __future__ import annotations

import errno
import logging
import os
import time
from pathlib import Path
from typing import Callable, Final

from voxcli.errors import DiskFullError, FetchError, IntegrityError
from voxcli.events import Progress
from voxcli.hub import resume
from voxcli.hub.verify import verify_file

ProgressFn = Callable[[Progress], None]
_LOG = logging.getLogger(__name__)
CHUNK: Final = 1 << 16
RETRIES: Final = 4


def _noop(_: Progress) -> None:
    pass


_progress_hook: ProgressFn | None = None


def set_progress_hook(fn: ProgressFn | None) -> None:
    """Where pulls without their own `on_progress` report (the CLI installs its progress view here),
    so a model pulled automatically on first use shows progress too.

    It lives here, not in `hub.pull`, so setting it costs a start nothing: every start
    imports this module (`hub.resolve`), only a start that pulls imports `hub.pull`."""
    global _progress_hook
    _progress_hook = fn


def progress_fn(fn: ProgressFn | None) -> ProgressFn:
    """`fn`, else the installed hook, else a function that drops the events."""
    return fn or _progress_hook or (lambda _p: None)


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
    from filelock import FileLock  # here, not at the top: every start imports this module

    part = downloads_dir / f"{key}.part"
    own_client = client is None
    client = client or http_client()
    try:
        with FileLock(str(part) + ".lock"):  # one live writer per partial file
            _fetch_part(client, url, part, size, sha256, model, on_progress)
            _verify_part(part, url, dest.name, sha256, size, model, on_progress)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(part, dest)  # a rename of the verified file, not a write: no temp file needed
            resume.meta_path(part).unlink(missing_ok=True)
    except httpx.InvalidURL as e:
        raise FetchError(f"{url}: invalid URL ({e})") from None
    finally:
        if own_client:
            client.close()
    return dest


class _Restart(Exception):
    """The server's reply cannot continue the partial file: it was discarded, start over."""


def _fetch_part(client, url: str, part: Path, size: int | None, sha256: str | None, model: str,
                on_progress: ProgressFn) -> None:
    """Bring `part` to the whole file: up to RETRIES requests, each resuming where the last stopped.

    A redirect loop or a body that cannot be decoded is a FetchError at once
    (retrying cannot help, and a catalog pull moves on to its next source).
    """
    import httpx

    last_error: Exception | None = None
    attempt = 0
    while attempt < RETRIES:
        try:
            _get_rest(client, url, part, size, sha256 is not None, model, on_progress)
            return
        except _Restart:
            continue  # bounded: a restart needs bytes that were kept, and those need a dropped try
        except (httpx.TooManyRedirects, httpx.DecodingError) as e:
            resume.discard(part)  # decoded bytes of a mis-encoded body are nothing to resume into
            what = "too many redirects" if isinstance(e, httpx.TooManyRedirects) else "cannot decode the body"
            raise FetchError(f"{url}: {what} ({e})") from None
        except (httpx.TransportError, httpx.StreamError) as e:
            last_error = e
            time.sleep(min(0.2 * 2**attempt, 2.0))
        except OSError as e:
            full = disk_full(e, part)
            if full is None:
                raise
            resume.discard(part)  # give the space back; there is nothing to resume into
            raise full from None
        attempt += 1
    raise FetchError(
        f"{url}: download failed after {RETRIES} tries ({last_error})",
        hint="check the network and run the same pull again: it resumes where it stopped",
    )


def _continues(r, part: Path, have: int) -> bool:
    """May the reply's body be appended to `have` bytes of `part`? False: it is the whole file."""
    if r.status_code != 206:
        return False  # 200 to a ranged request (If-Range failed, or no Range support): a whole new body
    if resume.range_start(r.headers.get("content-range")) != have or not resume.load(part).same_as(
            resume.Validator.of(r.headers)):
        resume.discard(part)  # another offset or another version: appending would splice
        raise _Restart
    return True


def _get_rest(client, url: str, part: Path, size: int | None, pinned_by_hash: bool, model: str,
              on_progress: ProgressFn) -> None:
    """One GET, resuming (`Range` + `If-Range`) from the bytes already in `part`; appends what arrives."""
    import httpx

    have, headers = resume.resume_headers(part, pinned_by_hash=pinned_by_hash)
    _LOG.info("GET %s%s", url, f" (resuming at byte {have})" if have else "")
    with client.stream("GET", url, headers={**headers, "Accept-Encoding": "identity"}) as r:
        if r.status_code == 416 and have:  # nothing after `have`: complete if the file has `have` bytes
            if resume.range_total(r.headers.get("content-range")) not in (None, have):
                resume.discard(part)
                raise _Restart
            return
        if r.status_code >= 400:
            raise FetchError(f"{url}: HTTP {r.status_code} {r.reason_phrase}".rstrip())
        if have and not _continues(r, part, have):
            have = 0
        if not have:
            resume.remember(part, resume.Validator.of(r.headers))
        total = size
        if total is None:
            length = r.headers.get("content-length")
            total = have + int(length) if length and length.isdigit() else None
        with open(part, "ab" if have else "wb") as f:
            _copy_body(r, f, have, total, model, url, on_progress)
    if size is not None and part.stat().st_size < size:
        raise httpx.RemoteProtocolError("connection closed before the end of the file")


def _copy_body(r, f, done: int, total: int | None, model: str, url: str, on_progress: ProgressFn) -> None:
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


def _verify_part(part: Path, url: str, name: str, sha256: str | None, size: int | None,
                 model: str, on_progress: ProgressFn) -> None:
    """Check the whole downloaded file; a wrong one is deleted so the next try starts clean."""
    if sha256 is None and size is None:
        return
    got = part.stat().st_size
    on_progress(Progress("verify", 0, got, model, url))
    try:
        verify_file(part, owner=url, sha256=sha256, size=size, name=name,
                    hint="the file on the server is not the one the catalog names; nothing was installed")
    except IntegrityError:
        resume.discard(part)
        raise
    on_progress(Progress("verify", got, got, model, url))
