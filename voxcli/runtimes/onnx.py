"""The one onnxruntime session policy every model runtime uses.

Why one place: voxcli runs several models at once (`chat` has a voice, an
ASR model, a VAD and an LLM on the same cores). onnxruntime's defaults are
tuned for one model owning the machine: a thread pool per session sized to
the physical cores whose idle workers busy-wait ("spin") between runs. Four
such pools on two cores steal each other's time slices, so every session
here gets a fixed, small intra-op pool, no inter-op pool (sequential
execution), spinning off in both pools, all graph optimizations, and the
provider list chosen below. A caller that shares the CPU passes `threads`
(see `voxcli.chat.models.thread_budget`).

Sessions on model files are created from an optimized copy saved on first use
(see "the optimized-graph cache" below): graph optimization is most of a cold
start, and it gives the same graph every time.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import time
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Final

from voxcli.fsutil import atomic_path, atomic_write

if TYPE_CHECKING:  # pragma: no cover
    import onnxruntime as ort

PROVIDERS: Final = ("CPUExecutionProvider",)
"""Execution providers, in order of preference. CPU only: the wheels this project
depends on ship no GPU provider, and an accelerator would change the timing that
the streaming schedules were measured with."""
MAX_DEFAULT_THREADS: Final = 4
"""Cap of the default intra-op pool: the models are small, beyond 4 threads a run
gains little and costs the other streams their cores."""
_LOG = logging.getLogger(__name__)
_LOG_ERRORS_ONLY: Final = 3
"""onnxruntime severity 3 = errors: its warnings (unused initializers, ...) are not the user's business."""


def default_threads(cap: int = MAX_DEFAULT_THREADS) -> int:
    """Threads of a session whose caller gave none: the cores, at most `cap`, at least 1."""
    return max(1, min(cap, os.cpu_count() or 1))


def session_options(threads: int | None = None) -> "ort.SessionOptions":
    """SessionOptions of the policy (see the module docstring); `threads` = intra-op pool size."""
    import onnxruntime as ort

    if threads is not None and threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.intra_op_num_threads = threads or default_threads()
    opts.inter_op_num_threads = 1
    # Spinning workers burn the cores that the other models and the audio threads need between runs.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    opts.log_severity_level = _LOG_ERRORS_ONLY
    return opts


def session(model: Path | str | bytes, *, threads: int | None = None,
            cache_dir: Path | None = None, cache: bool = True) -> "ort.InferenceSession":
    """An InferenceSession for a model file (or serialized model bytes) under the one policy.

    A file's optimized graph is cached in `cache_dir` (default `cache_dir_for`:
    the model's derived dir); `cache=False`, or bytes, optimize in memory every time.
    """
    if isinstance(model, bytes):
        return _plain(model, threads)
    model = Path(model)
    cache = cache and os.environ.get(ENV_NO_CACHE, "").strip().lower() not in {"1", "true", "yes", "on"}
    directory = (cache_dir if cache_dir is not None else cache_dir_for(model)) if cache else None
    if directory is None:
        return _plain(model, threads)
    return cached_session(model, Path(directory), threads)


def _plain(model: Path | bytes, threads: int | None) -> "ort.InferenceSession":
    import onnxruntime as ort

    source = model if isinstance(model, bytes) else os.fspath(model)
    return ort.InferenceSession(source, sess_options=session_options(threads), providers=list(PROVIDERS))


# --- the optimized-graph cache ----------------------------------------------------------
#
# Why: onnxruntime optimizes a graph every time a session is created (constant
# folding, fusions, layout changes); for the 56 MB Piper front part that is
# 300-500 ms of every `voxcli speak`'s cold start. The first session of a graph
# saves the optimized graph (`SessionOptions.optimized_model_filepath`); later
# ones load that file with optimizations off. The file name carries a key over
# everything the optimized graph depends on (format, onnxruntime version,
# providers, optimization level, CPU features, the sha256 of the source graph
# and its external data), so a changed input is a different file, never a
# stale one. A sidecar records the file's size and CRC-32: a truncated or
# flipped file is rebuilt, not loaded. At most KEEP_PER_NAME files per source
# name are kept (least recently used go), so old keys do not pile up.

CACHE_FORMAT: Final = 2
"""Bump when what the cache stores or how the key is computed changes (old files are then ignored)."""
ENV_NO_CACHE: Final = "VOXCLI_NO_GRAPH_CACHE"
"""Set to 1 to optimize every graph in memory as before (read at call time; benchmarks compare both)."""
SHARED_DIR: Final = "ort-optimized"
"""`<cache>/derived/<this>`: optimized graphs of models that do not live in a derived dir (packaged weights)."""
_SUFFIX: Final = ".opt.onnx"
_SOURCES: Final = "ort-sources.json"
"""Per cache dir: source path -> its files' sizes and mtimes, sha256 (a 56 MB graph is hashed once, not every start)."""


def cache_dir_for(model: Path) -> Path | None:
    """Where the optimized copy of `model` goes: its own derived dir, else the shared one; None: do not cache.

    ORT-format files (`.ort`, Moonshine) are already optimized offline.
    """
    model = Path(model)
    if model.suffix == ".ort":
        return None
    if model.parent.parent.name == "derived":
        return model.parent
    from voxcli.paths import cache_dir

    return cache_dir() / "derived" / SHARED_DIR


@functools.lru_cache(maxsize=1)
def _cpu_tag() -> str:
    # Optimized graphs may use layouts for this CPU's vector width (NCHWc): key them by its features.
    import platform

    tag = platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            flags = next((line for line in f if line.startswith(("flags", "Features"))), "")
        tag += "-" + hashlib.sha256(flags.encode()).hexdigest()[:8]
    except OSError:
        tag += "-" + platform.processor()
    return tag


def source_files(model: Path) -> list[Path]:
    """The graph file and its external-data siblings (`x.onnx.data`): everything the graph is made of."""
    model = Path(model)
    siblings = [p for p in model.parent.glob(f"{glob_escape(model.name)}.*")
                if p.suffix != ".lock" and p.is_file()]
    return [model, *sorted(siblings)]


def glob_escape(name: str) -> str:
    import glob

    return glob.escape(name)


def _sha256(paths: list[Path]) -> str:
    """One digest over the files' names and contents (each hashed by the hub's `sha256_file`)."""
    from voxcli.hub.verify import sha256_file

    return hashlib.sha256("".join(f"{p.name}\0{sha256_file(p)}\n" for p in paths).encode()).hexdigest()


def source_digest(model: Path, directory: Path) -> str:
    """sha256 of `model` and its external data, remembered in `directory` by path, sizes and mtimes
    (a 56 MB graph is hashed once per change, not on every start)."""
    files = source_files(model)
    stamp = [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files]
    memo_path, name = directory / _SOURCES, os.fspath(Path(model).resolve())
    try:
        memo = json.loads(memo_path.read_text(encoding="utf-8"))
        memo = memo if isinstance(memo, dict) else {}
    except (OSError, ValueError):
        memo = {}
    rec = memo.get(name)
    if isinstance(rec, dict) and rec.get("files") == stamp and isinstance(rec.get("sha256"), str):
        return rec["sha256"]
    digest = _sha256(files)
    memo = {k: v for k, v in memo.items() if os.path.exists(k)}  # forget sources that are gone (temp dirs)
    memo[name] = {"files": stamp, "sha256": digest}
    try:
        atomic_write(memo_path, json.dumps(memo, indent=1).encode(), durable=False)
    except OSError:
        pass  # read-only: hashed again next time
    return digest


def cache_key(model: Path, directory: Path) -> str:
    """What the optimized graph depends on, hashed: any change is a new file name."""
    import onnxruntime as ort

    parts = {"format": CACHE_FORMAT, "ort": ort.__version__, "providers": list(PROVIDERS),
             "level": "ORT_ENABLE_ALL", "cpu": _cpu_tag(), "source": source_digest(model, directory)}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


def cached_path(model: Path, directory: Path, key: str) -> Path:
    """The optimized file of `model` under `key` (its sidecar is the same name + .json).

    Content-addressed: the same graph from two places (a test's temp dir, a
    copied model) is one file, so the shared directory does not grow per path.
    """
    return directory / f"{Path(model).name.removesuffix('.onnx')}.{key}{_SUFFIX}"


def _crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            crc = zlib.crc32(chunk, crc)  # releases the GIL: runs beside onnxruntime's load
    return crc


def _load_optimized(path: Path, threads: int | None) -> "ort.InferenceSession | None":
    """A session on a cached optimized file if it is intact (size + CRC-32 as recorded), else None."""
    import threading

    import onnxruntime as ort

    try:
        meta = json.loads(path.with_name(path.name + ".json").read_text(encoding="utf-8"))
        if path.stat().st_size != meta["size"]:
            raise ValueError(f"size {path.stat().st_size} != {meta['size']}")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _LOG.warning("rebuilding optimized graph %s: %s", path.name, exc)
        return None
    crc: list[int] = []
    check = threading.Thread(target=lambda: crc.append(_crc32(path)), name="voxcli-crc", daemon=True)
    check.start()
    opts = session_options(threads)
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # done when it was saved
    try:
        sess = ort.InferenceSession(os.fspath(path), sess_options=opts, providers=list(PROVIDERS))
    except Exception as exc:  # noqa: BLE001 - a damaged cache file is rebuilt, whatever onnxruntime says
        _LOG.warning("rebuilding optimized graph %s: %s", path.name, exc)
        sess = None
    check.join()
    if sess is not None and (not crc or crc[0] != meta.get("crc32")):
        _LOG.warning("rebuilding optimized graph %s: its checksum changed", path.name)
        return None
    if sess is not None:
        try:
            os.utime(path)  # most recently used: `_prune` keeps it
        except OSError:
            pass
    return sess


def _build_optimized(model: Path, path: Path, threads: int | None) -> "ort.InferenceSession":
    """A session on `model` that also saves its optimized graph as `path` (atomically, with its sidecar)."""
    import onnxruntime as ort

    opts = session_options(threads)
    try:
        with atomic_path(path, durable=False) as tmp:
            opts.optimized_model_filepath = os.fspath(tmp)
            sess = ort.InferenceSession(os.fspath(model), sess_options=opts, providers=list(PROVIDERS))
            meta = {"size": tmp.stat().st_size, "crc32": _crc32(tmp), "source": model.name}
        atomic_write(path.with_name(path.name + ".json"), json.dumps(meta).encode(), durable=False)
    except OSError as exc:  # read-only or full cache dir: a plain session, optimized again next time
        _LOG.info("not caching the optimized graph of %s in %s: %s", model.name, path.parent, exc)
        return _plain(model, threads)
    except Exception as exc:  # noqa: BLE001 - onnxruntime could not save it: as before (a bad model fails there)
        _LOG.info("cannot save the optimized graph of %s (%s): optimizing in memory", model.name, exc)
        return _plain(model, threads)
    _prune(path)
    _LOG.info("saved the optimized graph of %s as %s", model.name, path)
    return sess


STALE_TMP_S: Final = 3600.0
"""A temp file of a build this old was left by a killed process (a live build writes it within seconds)."""
KEEP_PER_NAME: Final = 2
"""Optimized files kept per source file name (most recently used first): an older key (new
onnxruntime, changed graph) goes, two different models that share a name do not evict each other."""


def _prune(path: Path) -> None:
    """Remove the least recently used optimized files of the same source name beyond KEEP_PER_NAME."""
    stem = path.name[: -len(_SUFFIX)].rsplit(".", 1)[0]
    same = [p for p in path.parent.glob(f"*{_SUFFIX}") if p.name[: -len(_SUFFIX)].rsplit(".", 1)[0] == stem]
    same.sort(key=lambda p: (p == path, _mtime(p)), reverse=True)
    for old in same[KEEP_PER_NAME:]:
        for p in (old, old.with_name(old.name + ".json"), old.with_name(old.name + ".lock")):
            p.unlink(missing_ok=True)
    for tmp in path.parent.glob(f".{glob_escape(stem)}.*{_SUFFIX}.*.tmp"):  # a build killed mid-write
        if time.time() - _mtime(tmp) / 1e9 > STALE_TMP_S:
            tmp.unlink(missing_ok=True)


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def cached_session(model: Path, directory: Path, threads: int | None = None) -> "ort.InferenceSession":
    """A session for `model` from its optimized copy in `directory`, built and saved on first use.

    Never fails because of the cache: an unreadable directory means a plain
    session, a damaged copy is rebuilt.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path = cached_path(model, directory, cache_key(model, directory))
    except OSError as exc:
        _LOG.info("no optimized-graph cache in %s (%s)", directory, exc)
        return _plain(model, threads)
    sess = _load_optimized(path, threads)
    if sess is not None:
        return sess
    from filelock import FileLock, Timeout

    try:
        with FileLock(os.fspath(path) + ".lock", timeout=300):
            sess = _load_optimized(path, threads)  # another process may have built it meanwhile
            return sess if sess is not None else _build_optimized(model, path, threads)
    except (OSError, Timeout) as exc:
        _LOG.info("no optimized-graph cache in %s (%s)", directory, exc)
        return _plain(model, threads)
