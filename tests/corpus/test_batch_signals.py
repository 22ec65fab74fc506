"""A Ctrl-C that lands while a file's output is being written: the output and its manifest line
both exist afterwards, so the next run skips the file instead of keeping it as somebody else's.

The clean-clone CI once hit this window (tests/corpus/test_interrupt.py saw a file "kept" on the
re-run); here the signal is sent from inside the write, so the window is hit every time.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from voxcli.corpus.batch import finish_item, plan_one
from voxcli.corpus.items import Item
from voxcli.corpus.manifest import Manifest
from voxcli.corpus.work import Outcome, WorkerSpec, model_name
from voxcli.fsutil import atomic_write


class InterruptedWrite:
    """A job whose write is interrupted by the user right after the output is in place."""

    spec = WorkerSpec(kind="asr")

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir

    def items(self) -> list[Item]:
        return []

    def write(self, item: Item, outcome: Outcome) -> dict[str, Any]:
        assert item.output is not None
        atomic_write(item.output, "hello world\n")
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: after the rename, before the manifest line
        return {"words": 2}

    def finish(self, manifest: Manifest | None, items: list[Item]) -> None:
        pass


def test_ctrl_c_during_the_write_still_records_the_output(tmp_path: Path):
    src = tmp_path / "a.wav"
    src.write_bytes(b"RIFF....")
    out = tmp_path / "out"
    out.mkdir()
    job = InterruptedWrite(out)
    item = Item(key="a.txt", source=str(src), output=out / "a.txt")
    manifest = Manifest(out)
    with pytest.raises(KeyboardInterrupt):
        finish_item(job, manifest, item, Outcome(key="a.txt", ok=True, audio_s=1.0))
    assert (out / "a.txt").read_text() == "hello world\n"
    again = Manifest(out)  # what the next run reads from disk
    assert again.get("a.txt")["status"] == "done"
    r = plan_one(item, again, model_name(job.spec), force=False)
    assert r is not None and r.status == "skipped"  # not "kept", not redone
