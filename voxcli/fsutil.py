"""Append-only JSON-lines logs (bench history, chat turn log).

One `os.write` of a whole line on an O_APPEND descriptor: two processes
appending at once never interleave inside a line, and a crash can at worst
leave one torn last line, which the reader skips.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable


def append_line(path: Path, line: str, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return path


def read_records(path: Path, keep: Callable[[dict[str, Any]], bool], last: int | None = None) -> list[dict[str, Any]]:
    """The JSON objects of the file that `keep` accepts, oldest first; torn or foreign lines skipped."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and keep(obj):
            out.append(obj)
    return out[-last:] if last else out
