"""The manifest: one JSON line per finished item in the output dir, last line per key wins.

Why append-only lines: a record is appended (one `write` on O_APPEND,
`fsutil.append_line`) only after the item's output file was atomically
moved into place, so whenever the batch stops -- Ctrl-C, a kill, a full
disk -- every "done" line names a complete output, and at worst the last
line is torn (skipped on reading). A re-run reads it back, skips what is
done with the same input content and model, and retries what failed. On
open the file is compacted (one line per key, atomic rewrite), so it does
not grow without bound over many resumes.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from voxcli.fsutil import append_line, atomic_write, read_records

MANIFEST_NAME: Final = "voxcli-manifest.jsonl"

Status = Literal["done", "failed", "kept"]


@dataclass(frozen=True)
class Record:
    """One line of the manifest."""

    key: str
    """Output path relative to the output dir (the item's identity in the batch)."""
    input: str
    """The input file, or for text items the text itself."""
    status: Status
    """done (output written), failed (see error), kept (a newer output was there; not overwritten)."""
    model: str
    size: int = 0
    mtime_ns: int = 0
    sha256: str = ""
    error: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    """audio_s, work_s and per-job figures (utterances, words...)."""
    t: float = 0.0
    """When the record was written (Unix time)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)


def _is_record(obj: dict[str, Any]) -> bool:
    return isinstance(obj.get("key"), str) and obj.get("status") in ("done", "failed", "kept")


class Manifest:
    """The records of one output dir, loaded once; `add` appends a line and updates the view."""

    def __init__(self, out_dir: Path) -> None:
        self.path = out_dir / MANIFEST_NAME
        self.records: dict[str, dict[str, Any]] = {}
        for obj in read_records(self.path, _is_record):
            self.records[obj["key"]] = obj

    def compact(self) -> None:
        """Rewrite with one line per key (atomic), so resumes do not grow the file forever."""
        if self.path.exists():
            lines = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in self.records.values())
            atomic_write(self.path, lines)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.records.get(key)

    def add(self, record: Record) -> None:
        if not record.t:
            record = Record(**{**asdict(record), "t": round(time.time(), 3)})
        append_line(self.path, record.to_json())
        self.records[record.key] = json.loads(record.to_json())

    def done(self) -> list[dict[str, Any]]:
        return [r for r in self.records.values() if r["status"] == "done"]
