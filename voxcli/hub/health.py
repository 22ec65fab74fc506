"""Re-verify models already on disk: is every file still what was installed?

A model passes `pull` verification once; afterwards a disk error, an editor,
a half-finished copy or a catalog update can make it wrong while the
resolver (which checks names and sizes only, to stay fast) still finds it.
This module re-hashes every file against the sha256 recorded in the cache
manifest (and, for package-provided models, against the catalog) so
`voxcli doctor` can say which model is broken and re-pull it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from voxcli.hub.cache import Cache
from voxcli.hub.catalog import ModelEntry, load_catalog
from voxcli.hub.resolve import package_files
from voxcli.hub.verify import file_problem


@dataclass(frozen=True)
class ModelHealth:
    name: str
    kind: str
    origin: str
    """"cache" or "package"."""
    path: Path
    problems: tuple[str, ...] = ()
    """One sentence per bad file; empty when the model is healthy."""
    fixable: bool = False
    """True when `pull(name, force=True)` can repair it (a catalog model in the cache)."""
    bytes_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class CacheHealth:
    models: tuple[ModelHealth, ...] = ()
    missing_defaults: tuple[str, ...] = field(default=())
    """Default models that are neither in the cache nor in an installed package."""


def _check_files(expected: dict[str, tuple[str | None, int | None]], root: dict[str, Path]) -> tuple[list[str], int]:
    """One sentence per missing or wrong file (size first, then sha256), and the bytes hashed."""
    problems, checked = [], 0
    for fname, (sha, size) in expected.items():
        p = root.get(fname)
        if p is None or not p.is_file():
            problems.append(f"{fname} is missing")
            continue
        problem, digest = file_problem(p, sha256=sha, size=size, name=fname)
        checked += p.stat().st_size if digest is not None else 0
        if problem is not None:
            problems.append(problem)
    return problems, checked


def _check_cached(name: str, manifest: dict, cache: Cache, entry: ModelEntry | None) -> ModelHealth:
    d = cache.model_dir(name)
    recorded = {f["name"]: (f.get("sha256"), f.get("size")) for f in manifest.get("files", [])}
    problems, checked = _check_files(recorded, {n: d / n for n in recorded})
    if entry is not None:
        for f in entry.files:
            r = recorded.get(f.name)
            if r is None:
                problems.append(f"{f.name} is in the catalog but was never installed")
            elif f.sha256 and r[0] and r[0].lower() != f.sha256.lower():
                problems.append(f"{f.name} is an older version than the catalog's")
    kind = entry.kind if entry else manifest.get("kind", "data")
    return ModelHealth(name, kind, "cache", d, tuple(problems), fixable=entry is not None, bytes_checked=checked)


def _check_package(entry: ModelEntry, files: dict[str, Path]) -> ModelHealth:
    expected = {f.name: (f.sha256, f.size) for f in entry.files}
    problems, checked = _check_files(expected, files)
    path = next(iter(files.values())).parent
    return ModelHealth(entry.name, entry.kind, "package", path, tuple(problems), fixable=False, bytes_checked=checked)


def check_cache(cache: Cache | None = None, *, on_model: Callable[[str], None] | None = None) -> CacheHealth:
    """Hash every installed model (cache and package-provided) against its recorded digests."""
    cache = cache or Cache.default()
    catalog = load_catalog()
    results: list[ModelHealth] = []
    in_cache = cache.installed()
    for name, manifest in in_cache.items():
        if on_model:
            on_model(name)
        results.append(_check_cached(name, manifest, cache, catalog.get(name)))
    missing = []
    for name, entry in catalog.items():
        if name in in_cache:
            continue
        pkg = package_files(entry)
        if pkg is not None:
            if on_model:
                on_model(name)
            results.append(_check_package(entry, pkg[0]))
        elif entry.default:
            missing.append(name)
    return CacheHealth(tuple(sorted(results, key=lambda h: h.name)), tuple(missing))
