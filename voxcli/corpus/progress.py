"""What a corpus batch reports: one `FileResult` per item and a `Progress` snapshot after each.

Why audio seconds and not files: files differ in length by orders of
magnitude, so the throughput (audio-seconds per wall second) and the ETA
are computed on audio -- the remaining audio announced by the headers over
the throughput so far. The same events feed the rich/plain display, the
`--json` lines and the library's iterator.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

FileStatus = Literal["done", "failed", "skipped", "kept"]


@dataclass
class FileResult:
    """One item's end: written, failed (with the error), skipped (already done) or kept (a newer output)."""

    key: str
    input: str
    status: FileStatus
    output: str | None = None
    error: str | None = None
    audio_s: float = 0.0
    work_s: float = 0.0
    worker: str = ""
    result: Any = None
    """The worker's result (ASR: list of Utterance) for library callers; not in the JSON event."""

    @property
    def text(self) -> str:
        """The transcript, one utterance per line (ASR results)."""
        return "\n".join(u.text for u in (self.result or []) if hasattr(u, "text"))

    def to_json(self) -> str:
        d = {k: v for k, v in self.__dict__.items() if k != "result"}
        d["audio_s"], d["work_s"] = round(self.audio_s, 3), round(self.work_s, 3)
        return json.dumps({"event": "file", **d}, ensure_ascii=False)


@dataclass
class ModelChange:
    """Items done before with another model that this run redoes: said before any work, since the
    usual cause is not in the command (`voxcli pull moonshine-base-en` can change the default)."""

    model: str
    """The model this run uses."""
    before: dict[str, int]
    """Model the redone items were done with -> how many."""

    def to_json(self) -> str:
        return json.dumps({"event": "model_change", "model": self.model, "before": self.before}, ensure_ascii=False)


@dataclass
class Progress:
    """Counters of the run so far (skipped items count as finished, not as audio processed)."""

    total: int
    todo_audio_s: float = 0.0
    """Audio seconds the items to process announce (headers); the ETA's numerator."""
    done: int = 0
    failed: int = 0
    skipped: int = 0
    audio_s: float = 0.0
    """Audio seconds processed in this run (input audio for ASR, generated audio for TTS)."""
    started: float = field(default_factory=time.monotonic)
    elapsed_s: float = 0.0

    @property
    def finished(self) -> int:
        return self.done + self.failed + self.skipped

    @property
    def throughput(self) -> float:
        """Audio seconds per wall-clock second."""
        return self.audio_s / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        left = self.todo_audio_s - self.audio_s
        if self.finished >= self.total:
            return 0.0
        if self.throughput > 0 and left > 0:
            return left / self.throughput
        processed = self.done + self.failed
        if processed and self.elapsed_s > 0:  # no header durations (text items): by count
            return (self.total - self.finished) * self.elapsed_s / processed
        return None

    def count(self, r: FileResult) -> None:
        if r.status == "done":
            self.done += 1
            self.audio_s += r.audio_s
        elif r.status == "failed":
            self.failed += 1
        else:
            self.skipped += 1
        self.elapsed_s = time.monotonic() - self.started

    def to_json(self) -> str:
        eta = self.eta_s
        return json.dumps({"event": "progress", "total": self.total, "done": self.done, "failed": self.failed,
                           "skipped": self.skipped, "audio_s": round(self.audio_s, 3),
                           "elapsed_s": round(self.elapsed_s, 3), "throughput": round(self.throughput, 3),
                           "eta_s": None if eta is None else round(eta, 1)})

    def line(self) -> str:
        """The plain progress line (logs, CI, pipes)."""
        eta = self.eta_s
        return (f"{self.finished}/{self.total} files, {self.audio_s / 3600:.3f} h audio, "
                f"{self.throughput:.1f} audio-s/s, ETA {'?' if eta is None else _dur(eta)}"
                + (f", {self.failed} failed" if self.failed else "")
                + (f", {self.skipped} skipped" if self.skipped else ""))


def _dur(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
