"""The CLI side of corpus batches (`transcribe --out-dir`, `speak --from --out-dir`): options, display, exit code.

Shared by both commands so they take the same flags and report the same way:
events from `voxcli.corpus` go to the batch view on stderr (failures listed,
a progress line), or as JSON lines on stdout with --json; the exit code is 1
when any item failed (each is in the manifest and retried by a re-run), 130
on Ctrl-C, after the workers were stopped and the manifest left consistent.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Iterator, List, Optional

import typer

from voxcli.cli.errors import STATE, err, writing_stdout
from voxcli.cli.options import flag
from voxcli.errors import UsageError, VoxError

if TYPE_CHECKING:
    from voxcli.corpus.progress import ModelChange

JobsOpt = Annotated[Optional[int], typer.Option(
    "--jobs", min=1, show_default=False,
    help="Worker processes for a batch, each with the model and one thread (default: the cores).")]
# Why a required value ("local") and not `--ray [ADDRESS]`: typer (0.29) no longer supports
# click's optional-value options (flag_value is deprecated and ignored).
RayOpt = Annotated[Optional[str], typer.Option(
    "--ray", metavar="ADDRESS", show_default=False,
    help="Run the batch on a Ray cluster: HEAD:6379, auto, or `local` to start one here. Needs voxcli[ray].")]
ShipAudioOpt = Annotated[bool, flag(
    "--ship-audio", help="With --ray: send each file's bytes through Ray's object store (workers need no access to the inputs).")]
ForceOpt = Annotated[bool, flag("--force", help="Redo every item, replacing outputs even when newer or already done.")]


@dataclass(frozen=True)
class BatchArgs:
    """The batch flags common to transcribe and speak."""

    fmt: str
    model: Optional[str]
    endpoint_ms: int
    jobs: Optional[int]
    ray: Optional[str]
    ship_audio: bool
    force: bool


def run_corpus(files: List[str], from_list: Optional[str], out_dir: Optional[Path], a: BatchArgs,
               json_out: bool, quiet: bool) -> None:
    """`voxcli transcribe` over many inputs into --out-dir."""
    from voxcli.corpus.asr_job import transcribe_events
    from voxcli.corpus.inputs import read_list

    if out_dir is None:
        raise UsageError("many inputs need --out-dir", hint="voxcli transcribe DIR --out-dir transcripts")
    if "-" in files:
        raise UsageError("`-` (raw PCM on stdin) cannot be part of a batch", hint="use --from - for a list of paths on stdin")
    if a.ship_audio and a.ray is None:
        raise UsageError("--ship-audio needs --ray")
    inputs = files + (read_list(from_list) if from_list is not None else [])
    if not inputs:
        raise UsageError("nothing to transcribe: the list is empty")
    events = transcribe_events(inputs, out_dir, format=a.fmt, model=a.model, jobs=a.jobs, ray=a.ray,
                               ship_audio=a.ship_audio, endpoint_ms=a.endpoint_ms, force=a.force,
                               offline=STATE.offline or None)
    show_batch(events, out_dir, json_out, quiet, model_named=a.model is not None)


def model_change_warning(e: "ModelChange", out_dir: Path, model_named: bool) -> str:
    """The line for a batch's ModelChange: how many files, done with what, redone with what, and
    (when no model was named: the machine's default changed under the user) how to keep them."""
    before = ", ".join(sorted(e.before))
    keep = f"; --model {before} keeps them" if not model_named and len(e.before) == 1 else ""
    return (f"voxcli: warning: {sum(e.before.values())} file(s) in {out_dir} were done with {before}; they are "
            f"redone with {e.model}{'' if model_named else ' (the default here)'}{keep}")


def _emit(line: str) -> None:
    with writing_stdout():
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def show_batch(events: Iterator, out_dir: Path, json_out: bool, quiet: bool, *, model_named: bool = True) -> None:
    """Render a batch's events; raise (exit 1) when any item failed."""
    from voxcli.cli.views.asr import batch_view
    from voxcli.corpus.manifest import MANIFEST_NAME
    from voxcli.corpus.progress import FileResult, ModelChange

    view = None if json_out else batch_view(quiet)
    last = None
    try:
        for e in events:
            if json_out:
                _emit(e.to_json())
            if isinstance(e, ModelChange):
                err(model_change_warning(e, out_dir, model_named))
            elif isinstance(e, FileResult):
                if view is not None:
                    view.file(e)
            else:
                last = e
                if view is not None:
                    view.progress(e)
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()  # Ctrl-C: stop the workers before the exit (the manifest is already consistent)
        if view is not None:
            if last is not None:
                view.progress(last, final=True)
            view.close()
    if last is not None and last.failed:
        raise VoxError(f"{last.failed} of {last.total} item(s) failed; recorded in {out_dir / MANIFEST_NAME}, "
                       "a re-run retries them")
