"""Find an installed model by name, or pull it on first use.

Resolution order for a catalog model: an installed Python package that ships
the files (no copy, found through importlib), then the cache, then (unless
offline) an automatic `pull`. Models pulled from an arbitrary URL or path
live only in the cache and are found by their manifest.

Finding a model checks names and sizes only (fast) and writes nothing (a
read-only cache works). Using one (`resolve_model`) also compares each file's
mtime with the one recorded at install and re-hashes the files that differ,
so a model edited after install is refused at first use with a one-line fix,
at the cost of a few `stat` calls when nothing changed. `voxcli doctor`
re-hashes everything.
"""
from __future__ import annotations

import importlib.util
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from voxcli import paths
from voxcli.errors import IntegrityError, ModelNotFoundError, UsageError
from voxcli.fsutil import atomic_write
from voxcli.hub.cache import MANIFEST, Cache
from voxcli.hub.catalog import ModelEntry, Source, default_model, load_catalog
from voxcli.hub.download import ProgressFn
from voxcli.hub.verify import file_problem

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelBundle:
    """A model whose files are all on disk."""

    name: str
    kind: str
    path: Path
    """Directory holding the files (the package's data dir, or the cache dir)."""
    files: dict[str, Path]
    derived_dir: Path
    """Where artifacts built from this model go; may not exist yet (writers create it)."""
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


def package_files(entry: ModelEntry) -> tuple[dict[str, Path], Source] | None:
    """All of the model's files from one installed package (and that package's source), or None."""
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


def package_bundle(entry: ModelEntry, cache: Cache) -> tuple[ModelBundle, Source] | None:
    """The bundle of a catalog model an installed package provides in place, with that package."""
    found = package_files(entry)
    if found is None:
        return None
    files, src = found
    path = next(iter(files.values())).parent
    return ModelBundle(entry.name, entry.kind, path, files, cache.derived_dir(entry.name), "package", entry), src


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
    if package_files(entry):
        return "package"
    if _cache_files(entry.name, cache, entry):
        return "installed"
    return "missing"


def installed_bundle(name: str, cache: Cache | None = None) -> ModelBundle | None:
    """The bundle if the model is on disk now (no download, nothing written), else None."""
    cache = cache or Cache.default()
    entry = load_catalog().get(name)
    if entry is not None:
        found = package_bundle(entry, cache)
        if found is not None:
            return found[0]
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
        if file_problem(path, sha256=sha)[0] is not None:
            fix = f"voxcli pull {bundle.name} --force" if bundle.entry is not None else \
                f"voxcli pull SOURCE --name {bundle.name} --force"
            raise IntegrityError(
                f"model {bundle.name!r}: {rec['name']} was changed after it was installed (sha256 mismatch)",
                hint=f"reinstall it with `{fix}` (`voxcli doctor` checks every model)",
            )
        rec["mtime_ns"] = st.st_mtime_ns
        refreshed = True
    if refreshed:
        try:  # best effort: a read-only cache keeps re-hashing, which is only slower
            atomic_write(cache.model_dir(bundle.name) / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True),
                         durable=False)
        except OSError:
            pass


def names_of_kind(kind: str | None, cache: Cache) -> list[str]:
    """Catalog and cached model names of one kind (all kinds for None), for hints."""
    names = [n for n, e in load_catalog().items() if kind is None or e.kind == kind]
    names += [n for n, m in cache.installed().items() if n not in names and (kind is None or m.get("kind") == kind)]
    return sorted(names)


def _wrong_kind(name: str, actual: str, kind: str, cache: Cache) -> ModelNotFoundError:
    return ModelNotFoundError(f"{name!r} is a {actual} model, not a {kind} model",
                              hint=f"{kind} models: " + ", ".join(names_of_kind(kind, cache)))


def _not_installed(name: str, kind: str | None, cache: Cache, catalog: dict[str, ModelEntry]) -> ModelNotFoundError | IntegrityError:
    """Why a model cannot be used offline (or at all): unknown, broken, or simply not pulled."""
    label = f"{kind} model" if kind else "model"
    if name not in catalog:
        return ModelNotFoundError(
            f"unknown {label} {name!r}",
            hint=f"available {label}s: " + (", ".join(names_of_kind(kind, cache)) or "none") + " (see `voxcli models`)",
        )
    if cache.manifest(name) is not None:
        return IntegrityError(
            f"model {name!r} in the cache is incomplete or was changed after it was installed",
            hint=f"run `voxcli pull {name} --force` while online (or `voxcli doctor --fix`)",
        )
    return ModelNotFoundError(
        f"model {name!r} is not installed and voxcli is offline",
        hint=f"run `voxcli pull {name}` while online (or unset VOXCLI_OFFLINE / drop --offline)",
    )


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
        name = default_model(kind, catalog).name
    bundle = installed_bundle(name, cache)
    if bundle is not None:
        if kind and bundle.kind != kind:
            raise _wrong_kind(name, bundle.kind, kind, cache)
        if bundle.origin == "cache":
            check_unchanged(bundle, cache)
        _LOG.info("%s model %s from the %s: %s", bundle.kind, name, bundle.origin, bundle.path)
        return bundle
    entry = catalog.get(name)
    if entry is not None and kind and entry.kind != kind:
        raise _wrong_kind(name, entry.kind, kind, cache)
    if entry is None or offline:
        raise _not_installed(name, kind, cache, catalog)
    from voxcli.hub.pull import pull  # pull installs through this module's lookups: import on use

    return pull(name, on_progress=on_progress, cache_dir=cache.root)


@dataclass(frozen=True)
class ModelRow:
    """One line of `voxcli models`: a catalog model, or one pulled from a URL or path."""

    name: str
    kind: str
    default: bool
    size: int
    """Bytes (the catalog's sizes, or the installed files')."""
    license: str
    status: str
    """"package", "installed" or "missing"."""
    description: str


def list_models(cache: Cache | None = None, kind: str | None = None) -> list[ModelRow]:
    """Every catalog model with its status, then the cached models the catalog does not know."""
    cache = cache or Cache.default()
    rows = [ModelRow(e.name, e.kind, e.default, e.size, e.license, status(e, cache), e.description)
            for e in load_catalog().values()]
    known = {r.name for r in rows}
    rows += [ModelRow(n, m.get("kind", "data"), False, sum(f.get("size", 0) for f in m.get("files", [])),
                      m.get("license", ""), "installed", "pulled from " + ", ".join(m.get("sources", [])))
             for n, m in cache.installed().items() if n not in known]
    return [r for r in rows if kind is None or r.kind == kind]
