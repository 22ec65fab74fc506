"""Pull a model that is not in the catalog: from an HTTPS URL or a local path.

`voxcli pull ./my-voice.tar.gz --name myvoice` or
`voxcli pull https://host/voice.onnx --name myvoice --sha256 HEX`.
The files are recorded with their sha256 in the manifest, so a later
`resolve_model("myvoice")` finds them like any catalog model.
"""
from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path, PurePosixPath

from voxcli import paths
from voxcli.errors import UsageError
from voxcli.events import Progress
from voxcli.hub.cache import Cache, check_name
from voxcli.hub.download import ProgressFn, disk_full, download, extract_members, is_archive, list_archive, sha256_file
from voxcli.hub.registry import ModelBundle, _emit, installed_bundle


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


def default_name(source: str) -> str:
    base = source.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]
    for suffix in (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tbz2", ".txz", ".tar", ".zip", ".onnx", ".gguf"):
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
            break
    return base or "model"


def _strip_common_dir(members: list[str]) -> dict[str, str]:
    """member -> flat-ish output path, dropping one shared top-level folder."""
    parts = [PurePosixPath(m).parts for m in members]
    if len(parts) > 1 and all(len(p) > 1 for p in parts) and len({p[0] for p in parts}) == 1:
        return {str(PurePosixPath(*p[1:])): m for p, m in zip(parts, members)}
    if len(parts) == 1 and len(parts[0]) > 1:
        return {parts[0][-1]: members[0]}
    return {m: m for m in members}


def pull_adhoc(
    source: str,
    *,
    name: str | None = None,
    sha256: str | None = None,
    kind: str | None = None,
    force: bool = False,
    on_progress: ProgressFn | None = None,
    cache_dir: Path | None = None,
) -> ModelBundle:
    emit = _emit(on_progress)
    cache = Cache.default(cache_dir)
    name = check_name(name or default_name(source))
    is_url = source.startswith(("http://", "https://"))
    local = None if is_url else Path(source).expanduser()
    if local is not None and not local.exists():
        raise UsageError(f"{source}: no such file or directory", hint="give a catalog name, an https:// URL or a local path")
    emit(Progress("resolve", 0, None, name, source))
    with cache.lock(name):
        if not force and installed_bundle(name, cache) is not None:
            raise UsageError(f"a model named {name!r} is already installed", hint="use --force to replace it or --name to choose another name")
        staged = cache.staging_dir(name)
        work = Path(tempfile.mkdtemp(prefix="adhoc.", dir=staged.parent))
        try:
            if is_url:
                fname = source.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0] or "download"
                key = sha256 or hashlib.sha256(source.encode()).hexdigest()
                blob = work / fname
                download(source, blob, key=key, downloads_dir=cache.downloads(), sha256=sha256, model=name, on_progress=emit)
            else:
                assert local is not None
                blob = local
                if sha256 and local.is_file():
                    digest = sha256_file(local)
                    if digest != sha256.lower():
                        from voxcli.errors import IntegrityError

                        raise IntegrityError(f"{source}: sha256 mismatch (expected {sha256.lower()}, got {digest})")
            if blob.is_dir():
                members = [p for p in sorted(blob.rglob("*")) if p.is_file() and not p.is_symlink()]
                emit(Progress("extract", 0, len(members), name))
                for i, p in enumerate(members, 1):
                    dest = staged / p.relative_to(blob)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(p, dest)
                    emit(Progress("extract", i, len(members), name, p.name))
            elif is_archive(blob.name):
                cap = paths.max_extract_bytes()  # nobody described this archive: a generous bomb guard
                mapping = _strip_common_dir(list_archive(blob, cap))
                extract_members(blob, mapping, staged, model=name, on_progress=emit, max_bytes=cap)
            else:
                shutil.copyfile(blob, staged / blob.name)
            files = [p for p in sorted(staged.rglob("*")) if p.is_file()]
            if not files:
                raise UsageError(f"{source}: contains no files")
            total = sum(p.stat().st_size for p in files)
            done = 0
            records = []
            for p in files:
                rel = p.relative_to(staged).as_posix()
                records.append({"name": rel, "sha256": sha256_file(p), "size": p.stat().st_size})
                done += p.stat().st_size
                emit(Progress("verify", done, total, name, rel))
            kind = kind or guess_kind([r["name"] for r in records])
            cache.install(name, staged, {"kind": kind, "sources": [source], "files": records, "catalog": False})
        except OSError as e:
            full = disk_full(e, cache.root)
            if full is None:
                raise
            raise full from None
        finally:
            shutil.rmtree(staged, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)
    bundle = installed_bundle(name, cache)
    assert bundle is not None
    emit(Progress("ready", 1, 1, name, str(bundle.path)))
    return bundle
