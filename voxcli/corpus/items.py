"""One unit of corpus work and the fingerprint that lets a re-run recognize it.

Why size + mtime first and the hash only when they differ: hashing ten
thousand files on every re-run costs a full read of the corpus; like git's
index, an unchanged (size, mtime) is trusted and the recorded sha256 is
reused, and a touched-but-identical file is still recognized by its hash.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

HASH_BLOCK: Final = 1 << 20

Kind = Literal["audio", "text"]


@dataclass(frozen=True)
class Item:
    """One input and where its result goes."""

    key: str
    """Manifest key: the output path relative to the output dir (unique in a batch)."""
    source: str
    """The input file's path (kind "audio") or the text to speak (kind "text")."""
    output: Path | None
    """Where the result is written (None: library use without an output dir)."""
    kind: Kind = "audio"
    est_audio_s: float = 0.0
    """Audio seconds announced by the header (audio) or estimated from the text; for the ETA only."""


@dataclass(frozen=True)
class Fingerprint:
    """What identifies an input's content: size, mtime (ns) and sha256."""

    size: int
    mtime_ns: int
    sha256: str


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def text_fingerprint(text: str) -> Fingerprint:
    raw = text.encode("utf-8")
    return Fingerprint(len(raw), 0, hashlib.sha256(raw).hexdigest())


def quick_stat(item: Item) -> tuple[int, int] | None:
    """(size, mtime_ns) of an audio input, or None when it cannot be stat'ed (the worker reports why)."""
    if item.kind == "text":
        return len(item.source.encode("utf-8")), 0
    try:
        st = os.stat(item.source)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def fingerprint(item: Item, known: dict[str, object] | None = None) -> Fingerprint | None:
    """The item's fingerprint; `known` (a manifest record) lends its sha256 when size and mtime match."""
    if item.kind == "text":
        return text_fingerprint(item.source)
    stat = quick_stat(item)
    if stat is None:
        return None
    if known and (known.get("size"), known.get("mtime_ns")) == stat and isinstance(known.get("sha256"), str):
        return Fingerprint(stat[0], stat[1], str(known["sha256"]))
    try:
        return Fingerprint(stat[0], stat[1], sha256_file(item.source))
    except OSError:
        return None
