"""Which files a corpus command reads, and each one's path relative to the output dir.

Inputs are named the ways people name them: files, directories (walked
recursively, keeping files with an audio suffix), shell-style globs (for
shells that do not expand them, or for `**`), and list files (`--from
list.txt`, `-` for stdin) with one path per line. The relative layout is
what makes `--out-dir` mirror the input tree: a file under a directory
argument keeps its path below that directory, a glob match its path below
the glob's literal prefix, a plain relative path stays as given.
"""
from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Final, Iterable

from voxcli.errors import UsageError

AUDIO_SUFFIXES: Final = frozenset({".wav", ".flac", ".ogg", ".oga", ".mp3", ".opus", ".aiff", ".aif", ".au"})
"""Suffixes a directory walk keeps (what libsndfile reads); explicit files are taken whatever their suffix."""


@dataclass(frozen=True)
class Source:
    """One input file and its path relative to the output dir (without the output suffix)."""

    path: Path
    rel: PurePath


def _is_glob(arg: str) -> bool:
    return any(c in arg for c in "*?[")


def _plain_rel(path: Path) -> PurePath:
    """A relative path without `..` stays as given (the layout); anything else keeps only its name."""
    if not path.is_absolute() and ".." not in path.parts:
        return PurePath(path)
    return PurePath(path.name)


def _walk(root: Path) -> list[Source]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()  # a stable order whatever the filesystem's
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.suffix.lower() in AUDIO_SUFFIXES and not name.startswith("."):
                found.append(Source(p, PurePath(p.relative_to(root))))
    return found


def _glob(pattern: str) -> list[Source]:
    parts = Path(pattern).parts
    literal = [p for p in parts[: next(i for i, p in enumerate(parts) if _is_glob(p))]]
    base = Path(*literal) if literal else Path(".")
    out = []
    for m in sorted(glob.glob(pattern, recursive=True)):
        p = Path(m)
        if p.is_file():
            out.append(Source(p, PurePath(p.relative_to(base))))
    if not out:
        raise UsageError(f"{pattern}: no file matches")
    return out


def read_list(name: str) -> list[str]:
    """The non-blank, non-comment lines of a list file (`-`: stdin)."""
    try:
        text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"{name}: cannot read the list ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise UsageError(f"{name}: the list is not UTF-8 text") from None
    return [s for line in text.splitlines() if (s := line.strip()) and not s.startswith("#")]


def expand(args: Iterable[str]) -> list[Source]:
    """Files, directories and globs -> sources in argument order (a directory in sorted walk order).

    A missing path is a UsageError before anything runs: a typo should not cost an hour of batch.
    """
    out: list[Source] = []
    for arg in args:
        p = Path(arg)
        if p.is_dir():
            out += _walk(p)
        elif p.exists():
            out.append(Source(p, _plain_rel(p)))
        elif _is_glob(arg):
            out += _glob(arg)
        else:
            raise UsageError(f"{arg}: no such file or directory")
    return out


def output_rel(src: Source, suffix: str) -> str:
    """The output's path relative to the output dir, as the manifest key (POSIX separators)."""
    return src.rel.with_suffix(suffix).as_posix()


def check_unique(keys: list[tuple[str, Path]]) -> None:
    """Two inputs mapped to one output would overwrite each other: refuse before anything runs."""
    seen: dict[str, Path] = {}
    for key, path in keys:
        if key in seen and seen[key].resolve() != path.resolve():
            raise UsageError(f"{seen[key]} and {path} would both write {key}",
                             hint="give them different names, or transcribe them into different --out-dir")
        seen[key] = path
