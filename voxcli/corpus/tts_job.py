"""A TTS data set from a list of lines: one WAV per line plus `metadata.csv` (LJSpeech layout).

    out/wavs/lines-00001.wav ...   out/metadata.csv   out/voxcli-manifest.jsonl

`metadata.csv` is `id|text|normalized text` per line, no header, as LJSpeech
and the trainers that read it expect. Why it is rebuilt from the manifest at
the end of every run rather than appended: a resumed or partly failed run
must still produce one row per WAV that exists, in line order, and an atomic
rewrite can never leave a half-written table.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Iterator

from voxcli.corpus.backends import make_backend
from voxcli.corpus.batch import Event, run_batch
from voxcli.corpus.items import Item
from voxcli.corpus.manifest import Manifest
from voxcli.corpus.work import Outcome, WorkerSpec
from voxcli.errors import UsageError
from voxcli.fsutil import atomic_write

METADATA: Final = "metadata.csv"
WORDS_PER_S: Final = 2.5
"""A speaking rate for the ETA before any line is synthesized (Piper voices speak about this fast)."""


def utterance_id(prefix: str, n: int) -> str:
    return f"{prefix}-{n:05d}"


def _cell(text: str) -> str:
    """A metadata.csv field: `|` separates fields and a row is one line."""
    return re.sub(r"\s+", " ", text.replace("|", " ")).strip()


@dataclass
class SpeakJob:
    """Lines of text -> wavs/<id>.wav each, then metadata.csv from the manifest's finished rows."""

    lines: list[str]
    out_dir: Path
    spec: WorkerSpec
    prefix: str = "line"

    def items(self) -> list[Item]:
        return [Item(f"wavs/{utterance_id(self.prefix, n)}.wav", text,
                     self.out_dir / "wavs" / f"{utterance_id(self.prefix, n)}.wav", "text",
                     len(text.split()) / WORDS_PER_S)
                for n, text in enumerate(self.lines, 1)]

    def write(self, item: Item, outcome: Outcome) -> dict[str, Any]:
        from voxcli.audio.files import AtomicAudioWriter

        assert item.output is not None
        audio, rate, normalized = outcome.result
        item.output.parent.mkdir(parents=True, exist_ok=True)
        with AtomicAudioWriter(item.output, rate) as w:
            w.write(audio)
        return {"id": Path(item.key).stem, "normalized": normalized, "sample_rate": rate}

    def finish(self, manifest: Manifest | None, items: list[Item]) -> None:
        if manifest is None:
            return
        rows = []
        for it in items:
            rec = manifest.get(it.key)
            if rec and rec["status"] == "done" and it.output is not None and it.output.exists():
                stats = rec.get("stats", {})
                rows.append(f"{Path(it.key).stem}|{_cell(it.source)}|{_cell(stats.get('normalized', it.source))}\n")
        atomic_write(self.out_dir / METADATA, "".join(rows))


def speak_events(lines: list[str], out_dir: str | Path, *, voice: str | None = None, jobs: int | None = None,
                 ray: str | None = None, prefix: str = "line", force: bool = False,
                 offline: bool | None = None) -> Iterator[Event]:
    """Synthesize every line into `out_dir` (resumable, like transcribe_many); events for displays."""
    if not lines:
        raise UsageError("no lines to speak: the list is empty")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", prefix):
        raise UsageError(f"--prefix {prefix!r}: use letters, digits, '.', '_' or '-'")
    spec = WorkerSpec("tts", voice, offline=offline)
    job = SpeakJob(lines, Path(out_dir), spec, prefix)
    return run_batch(job, lambda: make_backend(spec, jobs, ray), force=force)
