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

import contextlib
import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

from voxcli.runtimes import derived, memory
from voxcli.runtimes.memory import keep_arena  # noqa: F401 - for the voice (runtimes.piper)

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
    memory.fix_heap_thresholds()  # once per process, before the first run of any model (issue 18)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.intra_op_num_threads = threads or default_threads()
    opts.inter_op_num_threads = 1
    # Spinning workers burn the cores that the other models and the audio threads need between runs.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    opts.log_severity_level = _LOG_ERRORS_ONLY
    # The CPU arena stays on (issue 18): off, chat was as low as with runs that shrink it (memory.session_class),
    # but a TTS run cost 45-65% more CPU; without memory's fixed heap thresholds, off was higher than on.
    return opts


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    import ctypes

    with contextlib.suppress(OSError, AttributeError, TypeError):  # glibc only: not in musl, macOS, Windows
        trim = ctypes.CDLL(None).malloc_trim  # Windows: CDLL(None) is a TypeError; musl, macOS: no symbol
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int  # int malloc_trim(size_t pad), declared
        return trim
    return None


def release_free_memory() -> bool:
    """Give the C heap's free pages back to the system (glibc `malloc_trim(0)`); True if some went back.

    Why: buffers onnxruntime and numpy free after a run stay in glibc's heaps, which return memory only from
    their top; `chat` runs four models on several threads, so free pages pile up in the middle. Chat path, a
    turn every 8 s, 7 min: 17-36 MB lower RSS at the same minute, for 0.1-0.2 ms a call. Call it after a unit
    of work (a reply), not per run; safe from any thread. False without glibc (a no-op there).
    """
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False


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


def sessions(models: list[Path | str | bytes], *, threads: int | None = None) -> list["ort.InferenceSession"]:
    """`session` of each model, created side by side (the first on the calling thread).

    Why: onnxruntime releases the GIL while it loads and initializes a graph,
    so on 2 cores the three parts of a split voice load in about the time of
    the largest (the front part): part of `voxcli speak`'s cold start.
    """
    if len(models) < 2:
        return [session(m, threads=threads) for m in models]
    import concurrent.futures

    import onnxruntime  # noqa: F401 - imported once here, not raced by the loader threads

    with concurrent.futures.ThreadPoolExecutor(len(models) - 1, thread_name_prefix="voxcli-load") as pool:
        rest = [pool.submit(session, m, threads=threads) for m in models[1:]]
        return [session(models[0], threads=threads), *(f.result() for f in rest)]


def _plain(model: Path | bytes, threads: int | None) -> "ort.InferenceSession":
    source = model if isinstance(model, bytes) else os.fspath(model)
    return memory.session_class()(source, sess_options=session_options(threads), providers=list(PROVIDERS))


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
# stale one. The file is a derived file like the split parts it is built
# from: recorded (size, sha256, stat stamp) when written and checked before it
# is loaded by `voxcli.runtimes.derived`, the one check (a truncated or flipped
# file is rebuilt, an unchanged one is not read again to prove it). The source
# digests of the key come from the same records, so a cold start hashes
# nothing. The weights are saved beside the graph (`<file>.data`, external
# initializers) and recorded with it: onnxruntime maps them instead of parsing
# them out of the protobuf. Only directories that keep records (`<cache>/derived/<name>`) cache
# optimized graphs; elsewhere a graph is optimized in memory. At most
# KEEP_PER_NAME files per source name are kept (least recently used go, by the
# mtime of an empty `.used` marker, so a load never writes to the checked file).

CACHE_FORMAT: Final = 4
"""Bump when what the cache stores or how the key is computed changes (old files are then ignored).
3: records in derived.json instead of a CRC sidecar; 4: weights in `<file>.data`."""
ENV_NO_CACHE: Final = "VOXCLI_NO_GRAPH_CACHE"
"""Set to 1 to optimize every graph in memory as before (read at call time; benchmarks compare both)."""
SHARED_DIR: Final = "ort-optimized"
"""`<cache>/derived/<this>`: optimized graphs of models that do not live in a derived dir (packaged weights)."""
_SUFFIX: Final = ".opt.onnx"
_USED: Final = ".used"
_DATA: Final = ".data"
_LEGACY: Final = ("ort-sources.json",)
"""Files of format 2 in a cache dir (its own digest memo): removed by the next build."""


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


def cache_key(model: Path, directory: Path) -> str:
    """What the optimized graph depends on, hashed: any change is a new file name.

    The source files' digests come from `derived.digest` (recorded, or
    remembered by stat stamp): a 56 MB graph is hashed once per change, not on every start.
    """
    import onnxruntime as ort

    source = "".join(f"{p.name}\0{derived.digest(directory, p)}\n" for p in source_files(model))
    parts = {"format": CACHE_FORMAT, "ort": ort.__version__, "providers": list(PROVIDERS),
             "level": "ORT_ENABLE_ALL", "cpu": _cpu_tag(), "source": hashlib.sha256(source.encode()).hexdigest()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


def cached_path(model: Path, directory: Path, key: str) -> Path:
    """The optimized file of `model` under `key`.

    Content-addressed: the same graph from two places (a test's temp dir, a
    copied model) is one file, so the shared directory does not grow per path.
    """
    return directory / f"{Path(model).name.removesuffix('.onnx')}.{key}{_SUFFIX}"


def _load_optimized(path: Path, threads: int | None) -> "ort.InferenceSession | None":
    """A session on a cached optimized file if it is there and as recorded (`derived.problems`), else None."""
    import onnxruntime as ort

    if not path.is_file():
        return None
    found = derived.problems(path.parent, [path, *_weights(path, listed=True)])
    if found:
        _LOG.warning("rebuilding optimized graph %s: %s", path.name, "; ".join(found))
        return None
    opts = session_options(threads)
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # done when it was saved
    try:
        sess = memory.session_class()(os.fspath(path), sess_options=opts, providers=list(PROVIDERS))
    except Exception as exc:  # noqa: BLE001 - a damaged cache file is rebuilt, whatever onnxruntime says
        _LOG.warning("rebuilding optimized graph %s: %s", path.name, exc)
        return None
    try:
        _used(path).touch()  # most recently used: `_prune` keeps it (the graph file itself is not written)
    except OSError:
        pass
    return sess


def _used(path: Path) -> Path:
    return path.with_name(path.name + _USED)


def _data(path: Path) -> Path:
    """The optimized graph's weights file (`<path>.data`, external initializers: onnxruntime maps it)."""
    return path.with_name(path.name + _DATA)


def _weights(path: Path, *, listed: bool = False) -> list[Path]:
    """[`_data(path)`] when it exists (a graph with no initializer of 1 KiB or more has none), or
    (`listed`) when the records list it: a graph whose recorded weights are gone is not loaded."""
    d = _data(path)
    return [d] if d.is_file() or (listed and derived.listed(path.parent, d)) else []


def _build_optimized(model: Path, path: Path, threads: int | None) -> "ort.InferenceSession":
    """A session on `model` that also saves its optimized graph as `path` (atomically, then recorded)."""
    opts = session_options(threads)
    # The weights go to their own file, which onnxruntime maps instead of parsing them out of the
    # protobuf: loading the front part costs ~20 % less CPU, the flow ~60 % (format 4).
    opts.add_session_config_entry("session.optimized_model_external_initializers_file_name", _data(path).name)
    opts.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    try:
        with _staging(path) as staged:
            opts.optimized_model_filepath = os.fspath(staged)
            sess = memory.session_class()(os.fspath(model), sess_options=opts, providers=list(PROVIDERS))
            _publish(staged, path)
        derived.record(path.parent, [path, *_weights(path)])
        _used(path).touch()
    except OSError as exc:  # read-only or full cache dir: a plain session, optimized again next time
        _LOG.info("not caching the optimized graph of %s in %s: %s", model.name, path.parent, exc)
        return _plain(model, threads)
    except Exception as exc:  # noqa: BLE001 - onnxruntime could not save it: as before (a bad model fails there)
        _LOG.info("cannot save the optimized graph of %s (%s): optimizing in memory", model.name, exc)
        return _plain(model, threads)
    _prune(path)
    _LOG.info("saved the optimized graph of %s as %s", model.name, path)
    return sess


@contextlib.contextmanager
def _staging(path: Path) -> Iterator[Path]:
    """`<private temp dir>/<path's name>`, removed afterwards (a killed build's by `_prune`). Why a dir:
    onnxruntime writes the weights itself, under the name it records in the graph: the final one."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp / path.name
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _publish(staged: Path, path: Path) -> None:
    """Move a staged build into place (caller holds the lock): the weights first, the graph last.

    A reader seeing new weights with the old graph finds them unlike the records and waits for the
    lock; a process still mapping the old weights keeps its pages (a rename never overwrites them).
    """
    if _data(staged).is_file():
        os.replace(_data(staged), _data(path))
    else:
        _data(path).unlink(missing_ok=True)  # the new graph has no weights file: the old one is not its
    os.replace(staged, path)


STALE_TMP_S: Final = 3600.0
"""A temp file of a build this old was left by a killed process (a live build writes it within seconds)."""
KEEP_PER_NAME: Final = 2
"""Optimized files kept per source file name (most recently used first): an older key (new
onnxruntime, changed graph) goes, two different models that share a name do not evict each other."""


def _prune(path: Path) -> None:
    """Remove the least recently used optimized files of the same source name beyond KEEP_PER_NAME."""
    stem = path.name[: -len(_SUFFIX)].rsplit(".", 1)[0]
    same = [p for p in path.parent.glob(f"*{_SUFFIX}") if p.name[: -len(_SUFFIX)].rsplit(".", 1)[0] == stem]
    same.sort(key=lambda p: (p == path, max(_mtime(_used(p)), _mtime(p))), reverse=True)
    for old in same[KEEP_PER_NAME:]:
        for suffix in ("", _DATA, _USED, ".json", ".lock"):  # .json: the sidecar of format 2
            old.with_name(old.name + suffix).unlink(missing_ok=True)
    for tmp in path.parent.glob(f".{glob_escape(stem)}.*{_SUFFIX}.*.tmp"):  # a build killed mid-write
        if _stale(tmp):
            shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)
    for extra in (*path.parent.glob(f"*{_SUFFIX}{_DATA}"), *path.parent.glob(f"*{_SUFFIX}{_USED}")):
        graph = extra.with_name(extra.name.rsplit(".", 1)[0])
        if not graph.exists() and _stale(extra):  # its graph is gone (a killed build, a crash mid-prune)
            extra.unlink(missing_ok=True)
    for name in _LEGACY:
        (path.parent / name).unlink(missing_ok=True)


def _stale(path: Path) -> bool:
    """True when `path` was last written STALE_TMP_S ago (no live build is still writing it)."""
    return time.time() - _mtime(path) / 1e9 > STALE_TMP_S


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def cached_session(model: Path, directory: Path, threads: int | None = None) -> "ort.InferenceSession":
    """A session for `model` from its optimized copy in `directory`, built and saved on first use.

    Never fails because of the cache: an unreadable directory, or one that
    keeps no records, means a plain session; a damaged copy is rebuilt.
    """
    if not derived.recorded(directory):
        _LOG.info("not caching optimized graphs in %s: not a derived dir of a cache", directory)
        return _plain(model, threads)
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
