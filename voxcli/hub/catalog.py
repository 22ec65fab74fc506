"""The model catalog: what models exist, what files they consist of, where to get them.

The built-in `catalog.toml` ships inside the package; user catalogs
($VOXCLI_CATALOG) are merged over it so a mirror or a private voice can be
added without a release.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from voxcli import paths
from voxcli.errors import ModelNotFoundError, UsageError
from voxcli.hub.model_cards import ModelCard, parse_card

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ModelKind = Literal["tts", "asr", "vad", "llm", "data"]
KINDS: tuple[str, ...] = ("tts", "asr", "vad", "llm", "data")
SourceType = Literal["package", "wheel", "url"]


@dataclass(frozen=True)
class ModelFile:
    name: str
    """File name inside the model directory (flat)."""
    sha256: str | None
    size: int | None = None


@dataclass(frozen=True)
class Source:
    """One place some (or all) of a model's files can come from."""

    type: SourceType
    members: dict[str, str]
    """model file name -> path inside the source ("" for a single-file URL)."""
    package: str = ""
    distribution: str = ""
    project: str = ""
    version: str = ""
    filename: str = ""
    url: str = ""
    sha256: str | None = None
    """Digest of the downloaded wheel/archive, when known in advance."""

    def describe(self) -> str:
        if self.type == "package":
            return f"package {self.distribution or self.package}"
        if self.type == "wheel":
            return f"wheel {self.project}=={self.version}"
        return self.url


@dataclass(frozen=True)
class ModelEntry:
    name: str
    kind: ModelKind
    files: tuple[ModelFile, ...]
    sources: tuple[Source, ...]
    default: bool = False
    license: str = ""
    description: str = ""
    language: str = ""
    homepage: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    card: ModelCard | None = None
    """The `card` table, parsed and checked with the entry (hub/model_cards.py); None when it has none."""

    @property
    def size(self) -> int:
        return sum(f.size or 0 for f in self.files)

    def file(self, name: str) -> ModelFile:
        for f in self.files:
            if f.name == name:
                return f
        raise KeyError(name)


def _parse_entry(name: str, raw: dict[str, Any], origin: str) -> ModelEntry:
    try:
        kind = raw["kind"]
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}")
        files = tuple(
            ModelFile(name=f["name"], sha256=(f.get("sha256") or None), size=f.get("size")) for f in raw.get("files", [])
        )
        sources = tuple(
            Source(
                type=s["type"],
                members=dict(s.get("members", {})),
                package=s.get("package", ""),
                distribution=s.get("distribution", ""),
                project=s.get("project", ""),
                version=str(s.get("version", "")),
                filename=s.get("filename", ""),
                url=s.get("url", ""),
                sha256=s.get("sha256"),
            )
            for s in raw.get("sources", [])
        )
        for s in sources:
            if s.type not in ("package", "wheel", "url"):
                raise ValueError(f"unknown source type {s.type!r}")
            unknown = set(s.members) - {f.name for f in files}
            if unknown:
                raise ValueError(f"source {s.describe()} names files not in the model: {sorted(unknown)}")
        # Cards are ASR's (hub/model_cards.py); another kind's `card` table stays in `extra`, unchecked, as before
        card = parse_card(name, kind, raw.get("card"), runtime=raw.get("runtime"), license=raw.get("license", ""),
                          size=sum(f.size or 0 for f in files)) if kind == "asr" else None
    except (KeyError, ValueError, TypeError) as e:
        raise UsageError(f"{origin}: bad catalog entry {name!r}: {e}") from None
    known = {"kind", "files", "sources", "default", "license", "description", "language", "homepage"}
    known |= {"card"} if kind == "asr" else set()
    return ModelEntry(
        name=name,
        kind=kind,
        files=files,
        sources=sources,
        default=bool(raw.get("default", False)),
        license=raw.get("license", ""),
        description=raw.get("description", ""),
        language=raw.get("language", ""),
        homepage=raw.get("homepage", ""),
        extra={k: v for k, v in raw.items() if k not in known},
        card=card,
    )


def _load_toml(text: str, origin: str) -> dict[str, ModelEntry]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{origin}: not valid TOML ({e})") from None
    return {name: _parse_entry(name, raw, origin) for name, raw in data.get("models", {}).items()}


def load_catalog() -> dict[str, ModelEntry]:
    """Built-in catalog plus user catalogs (later ones override by name)."""
    text = resources.files("voxcli.hub").joinpath("catalog.toml").read_text(encoding="utf-8")
    models = _load_toml(text, "built-in catalog")
    for path in paths.extra_catalogs():
        try:
            models.update(_load_toml(Path(path).read_text(encoding="utf-8"), str(path)))
        except OSError as e:
            raise UsageError(f"{path}: cannot read catalog ({e.strerror})") from None
    return models


def default_model(kind: str, catalog: dict[str, ModelEntry] | None = None) -> ModelEntry:
    catalog = catalog if catalog is not None else load_catalog()
    for entry in catalog.values():
        if entry.kind == kind and entry.default:
            return entry
    for entry in catalog.values():
        if entry.kind == kind:
            return entry
    raise ModelNotFoundError(f"no {kind} model in the catalog")


def get_entry(name: str, catalog: dict[str, ModelEntry] | None = None) -> ModelEntry:
    catalog = catalog if catalog is not None else load_catalog()
    try:
        return catalog[name]
    except KeyError:
        raise ModelNotFoundError(
            f"unknown model {name!r}",
            hint="known models: " + ", ".join(sorted(catalog)) + " (see `voxcli models`)",
        ) from None
