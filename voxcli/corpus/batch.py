"""The driver of a corpus batch: plan, dispatch, write, record -- the same for every job.

Why one driver for transcribe and speak: resuming, retrying failures, not
overwriting, progress and executors are where batch tools go wrong, so they
are written once. A job only says what its items are, how one result is
written (atomically) and what to do at the end (speak's metadata.csv).

The order of effects per item is the consistency argument: the output file
is moved into place first, then the manifest line is appended, with Ctrl-C
and SIGTERM held between the two (`voxcli.signals`): every "done" line is
backed by a complete file, and every output we wrote has its line (else the
next run would take it for somebody else's file and keep it).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, Union

from voxcli.corpus.backends import Backend
from voxcli.corpus.items import Fingerprint, Item, fingerprint, quick_stat
from voxcli.corpus.manifest import Manifest, Record
from voxcli.corpus.progress import FileResult, ModelChange, Progress
from voxcli.corpus.work import Outcome, Task, WorkerSpec, model_name
from voxcli.errors import DiskFullError, VoxError
from voxcli.signals import signals_held

Event = Union[FileResult, Progress, ModelChange]


class Job(Protocol):
    """What differs between transcribe and speak."""

    spec: WorkerSpec
    out_dir: Path | None

    def items(self) -> list[Item]: ...
    def write(self, item: Item, outcome: Outcome) -> dict[str, Any]: ...
    def finish(self, manifest: Manifest | None, items: list[Item]) -> None: ...


def plan_one(item: Item, manifest: Manifest | None, model: str, force: bool) -> FileResult | None:
    """A FileResult when the item needs no work (skipped: done before; kept: a newer output), else None.

    Redone: never recorded, failed, a different model, or input content changed
    (our own older output is replaced). Kept: an output we did not record is
    there and is newer than the input -- somebody else's result, not overwritten.
    """
    if item.output is None or force:
        return None
    rec = manifest.get(item.key) if manifest else None
    exists = item.output.exists()
    if rec is not None and rec["status"] == "done":
        if not exists or rec.get("model") != model:
            return None
        fp = fingerprint(item, rec)
        same = fp is not None and fp.sha256 == rec.get("sha256")
        return FileResult(item.key, item.source, "skipped", str(item.output)) if same else None
    if exists:
        stat = quick_stat(item)
        if stat is not None and item.output.stat().st_mtime_ns >= stat[1]:
            return FileResult(item.key, item.source, "kept", str(item.output),
                              error="a newer output is already there (use --force to replace it)")
    return None


def _done_with(manifest: Manifest | None, item: Item) -> str | None:
    """The model `item`'s finished output (still there) was made with; None when nothing is done."""
    rec = manifest.get(item.key) if manifest is not None else None
    if rec is None or rec["status"] != "done" or item.output is None or not item.output.exists():
        return None
    return str(rec.get("model"))


def _fingerprint(manifest: Manifest, item: Item) -> Fingerprint | None:
    known = manifest.get(item.key)
    return fingerprint(item, known if known and known.get("status") == "done" else None)


def _record(manifest: Manifest, item: Item, r: FileResult, model: str, stats: dict[str, Any],
            fp: Fingerprint | None) -> None:
    manifest.add(Record(key=item.key, input=item.source, status=r.status if r.status != "skipped" else "done",
                        model=model, size=fp.size if fp else 0, mtime_ns=fp.mtime_ns if fp else 0,
                        sha256=fp.sha256 if fp else "", error=r.error,
                        stats={"audio_s": round(r.audio_s, 3), "work_s": round(r.work_s, 3), **stats}))


def finish_item(job: Job, manifest: Manifest | None, item: Item, out: Outcome) -> FileResult:
    """Write the output (if any), then the manifest line; a write error fails the item, a full disk the batch."""
    stats: dict[str, Any] = {}
    error = out.error
    fp = _fingerprint(manifest, item) if manifest is not None else None  # hashing waits outside the hold
    with signals_held():  # a Ctrl-C between the output and its line would leave an output nobody recorded
        if out.ok and item.output is not None:
            try:
                stats = job.write(item, out)
            except DiskFullError:
                raise
            except (OSError, VoxError) as e:
                error = str(e).splitlines()[0]
        ok = out.ok and error is None
        r = FileResult(item.key, item.source, "done" if ok else "failed",
                       str(item.output) if ok and item.output else None,
                       error, out.audio_s if ok else 0.0, out.work_s, out.worker, out.result)
        if manifest is not None:
            _record(manifest, item, r, model_name(job.spec), stats, fp)
    return r


def run_batch(job: Job, backend: Callable[[], Backend], *, force: bool = False) -> Iterator[Event]:
    """Events of the whole batch: a FileResult per item, each followed by a Progress snapshot (first a
    ModelChange when items done with another model are redone).

    `backend` is called only when there is work (a fully done re-run loads no model).
    Stopping the iteration (Ctrl-C, `close()`) stops the workers; the manifest stays consistent.
    """
    items = job.items()
    manifest = None
    if job.out_dir is not None:
        job.out_dir.mkdir(parents=True, exist_ok=True)
        manifest = Manifest(job.out_dir)
        manifest.compact()
    model = model_name(job.spec)
    todo: dict[str, Item] = {}
    done_before: list[FileResult] = []
    redo: dict[str, int] = {}
    for it in items:
        r = plan_one(it, manifest, model, force)
        if r is None:
            todo[it.key] = it
            if not force and (old := _done_with(manifest, it)) not in (None, model):
                redo[str(old)] = redo.get(str(old), 0) + 1
        else:
            done_before.append(r)
    if redo:
        yield ModelChange(model, redo)
    progress = Progress(len(items), todo_audio_s=sum(i.est_audio_s for i in todo.values()))
    for r in done_before:
        if r.status == "kept" and manifest is not None:
            manifest.add(Record(key=r.key, input=r.input, status="kept", model=model, error=r.error))
        progress.count(r)
        yield r
    if todo:
        yield from _dispatch(job, backend(), manifest, todo, progress)  # a Progress after each item
    job.finish(manifest, items)
    if not todo:
        yield progress


def _dispatch(job: Job, backend: Backend, manifest: Manifest | None, todo: dict[str, Item],
              progress: Progress) -> Iterator[Event]:
    tasks = (Task(it.key, it.source, Path(it.source).suffix if it.kind == "audio" else "") for it in todo.values())
    interrupted = True
    try:
        for out in backend.map(tasks):
            item = todo.get(out.key)
            if item is None:
                continue
            r = finish_item(job, manifest, item, out)
            progress.count(r)
            yield r
            yield progress
        interrupted = False
    finally:
        backend.close() if not interrupted else _abort(backend)


def _abort(backend: Backend) -> None:
    """Stop now: Ctrl-C should not wait for the files in progress (they are re-done next run)."""
    abort = getattr(backend, "abort", None)
    (abort or backend.close)()


def results_only(events: Iterator[Event]) -> Iterator[FileResult]:
    """The FileResults of a batch (what the library's iterators yield)."""
    return (e for e in events if isinstance(e, FileResult))


__all__ = ["Event", "Job", "finish_item", "plan_one", "results_only", "run_batch"]
