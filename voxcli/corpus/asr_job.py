"""Transcribing many files: the job for the batch driver, and `transcribe_many` for Python users.

    import voxcli
    for r in voxcli.transcribe_many(["talks/"], out_dir="subs", format="srt", jobs=2):
        print(r.status, r.input, r.error or r.output)

Without `out_dir` nothing is written (no manifest either) and each result
carries its utterances (`r.result`, `r.text`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from voxcli.asr.models import default_asr
from voxcli.corpus.backends import make_backend
from voxcli.corpus.batch import Event, results_only, run_batch
from voxcli.corpus.formats import FORMATS, render
from voxcli.corpus.inputs import Source, check_unique, expand, output_rel
from voxcli.corpus.items import Item
from voxcli.corpus.manifest import Manifest
from voxcli.corpus.progress import FileResult
from voxcli.corpus.work import Outcome, WorkerSpec, model_name
from voxcli.errors import UsageError
from voxcli.fsutil import atomic_write


def _duration(path: Path) -> float:
    from voxcli.audio.files import audio_info

    try:
        return audio_info(path).duration_s
    except Exception:  # noqa: BLE001 - a bad header fails in the worker, with its error recorded
        return 0.0


@dataclass
class TranscribeJob:
    """Audio files -> one transcript file each under `out_dir`, in the input's relative layout."""

    sources: list[Source]
    out_dir: Path | None
    fmt: str
    spec: WorkerSpec

    def items(self) -> list[Item]:
        keyed = [(output_rel(s, "." + self.fmt), s) for s in self.sources]
        check_unique([(k, s.path) for k, s in keyed])
        # Absolute: a pool or Ray worker may run in another directory (same paths on every node).
        return [Item(k, os.path.abspath(s.path), self.out_dir / k if self.out_dir else None, "audio", _duration(s.path))
                for k, s in keyed]

    def write(self, item: Item, outcome: Outcome) -> dict[str, Any]:
        assert item.output is not None
        meta = {"input": item.source, "model": model_name(self.spec), "audio_s": round(outcome.audio_s, 3)}
        item.output.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(item.output, render(self.fmt, outcome.result, meta))
        return {"utterances": len(outcome.result), "words": sum(len(u.text.split()) for u in outcome.result)}

    def finish(self, manifest: Manifest | None, items: list[Item]) -> None:
        pass


def transcribe_events(inputs: Iterable[str], out_dir: str | Path | None = None, *, format: str = "txt",
                      model: str | None = None, jobs: int | None = None, ray: str | None = None,
                      ship_audio: bool = False, endpoint_ms: int = 500, force: bool = False,
                      offline: bool | None = None) -> Iterator[Event]:
    """The batch's events (FileResult, Progress, first a ModelChange if any), for displays; see `transcribe_many`."""
    if format not in FORMATS:
        raise UsageError(f"unknown format {format!r}", hint="choose " + ", ".join(FORMATS))
    sources = expand(inputs)
    if not sources:
        raise UsageError("no audio files in the inputs", hint="directories are searched for .wav, .flac, .ogg, .mp3 ...")
    # The default decided once, here: every worker process and Ray node then runs (and records) the same model.
    spec = WorkerSpec("asr", model or default_asr(), endpoint_ms=endpoint_ms, offline=offline)
    job = TranscribeJob(sources, Path(out_dir) if out_dir is not None else None, format, spec)
    return run_batch(job, lambda: make_backend(spec, jobs, ray, ship_audio), force=force)


def transcribe_many(inputs: Iterable[str], out_dir: str | Path | None = None, *, format: str = "txt",
                    model: str | None = None, jobs: int | None = None, ray: str | None = None,
                    ship_audio: bool = False, endpoint_ms: int = 500, force: bool = False,
                    offline: bool | None = None) -> Iterator[FileResult]:
    """Transcribe files, directories (recursive) and globs; yield a `FileResult` per file as it finishes.

    `jobs`: worker processes (None: the cores; 1: in this process). `ray`: run on a
    Ray cluster instead ("" for a local one, or an address). With `out_dir`, each
    transcript is written there in `format` (txt, json, srt, vtt) and a manifest
    makes a re-run skip finished files and retry failed ones. Worker processes are
    spawned, so a script using jobs > 1 needs the usual `if __name__ == "__main__":` guard.
    """
    return results_only(transcribe_events(inputs, out_dir, format=format, model=model, jobs=jobs, ray=ray,
                                          ship_audio=ship_audio, endpoint_ms=endpoint_ms, force=force,
                                          offline=offline))
