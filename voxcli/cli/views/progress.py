"""Showing `Progress` events: rich bars on a terminal, one line per phase off it, JSON lines with --json."""
from __future__ import annotations

import sys
from typing import IO

from voxcli.cli.views.terminal import fancy_terminal
from voxcli.events import Progress


def _fmt_bytes(n: float | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


class PlainProgress:
    """One line per model and phase (not per byte): readable in CI logs."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self._seen: set[tuple[str, str]] = set()

    def __call__(self, p: Progress) -> None:
        key = (p.model, p.phase + (p.detail if p.phase in ("download", "resolve") else ""))
        if p.phase == "download" and p.total and p.done >= p.total:
            key = (p.model, "download-done" + p.detail)
            if key not in self._seen:
                self._seen.add(key)
                print(f"{p.model}: downloaded {_fmt_bytes(p.done)}", file=self.stream, flush=True)
            return
        if key in self._seen and p.phase != "ready":
            return
        self._seen.add(key)
        if p.phase == "resolve":
            msg = f"resolving {p.detail or p.model}"
        elif p.phase == "download":
            msg = f"downloading {p.detail} ({_fmt_bytes(p.total)})"
        elif p.phase == "verify":
            msg = "verifying sha256"
        elif p.phase == "extract":
            msg = f"extracting {p.total} file(s)"
        else:
            msg = f"ready: {p.detail}"
        print(f"{p.model}: {msg}", file=self.stream, flush=True)

    def close(self) -> None:
        pass


class JsonProgress:
    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stdout
        self._last: tuple[str, str, int] | None = None

    def __call__(self, p: Progress) -> None:
        print(p.to_json(), file=self.stream, flush=True)

    def close(self) -> None:
        pass


class RichProgress:
    """Bytes, speed and ETA for downloads; files for extraction."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress as RP, TextColumn, TimeRemainingColumn, TransferSpeedColumn

        self.console = Console(stderr=True)
        self.bar = RP(
            TextColumn("[bold]{task.fields[model]}[/] {task.description}"),
            BarColumn(),
            TextColumn("{task.fields[amount]}"),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self.tasks: dict[tuple[str, str], int] = {}
        self.bar.start()

    def __call__(self, p: Progress) -> None:
        if p.phase == "ready":
            self.console.print(f"[green]✓[/] {p.model}: {p.detail}")
            return
        if p.phase == "resolve":
            return
        key = (p.model, p.phase if p.phase != "download" else f"download:{p.detail}")
        desc = {"download": "download", "verify": "verify", "extract": "extract"}[p.phase]
        if p.phase == "extract":
            amount = f"{p.done}/{p.total} files"
        else:
            amount = f"{_fmt_bytes(p.done)}/{_fmt_bytes(p.total)}"
        if key not in self.tasks:
            self.tasks[key] = self.bar.add_task(desc, total=p.total, model=p.model, amount=amount)
        self.bar.update(self.tasks[key], completed=p.done, total=p.total, amount=amount)

    def close(self) -> None:
        self.bar.stop()


def make_progress(json_mode: bool = False, quiet: bool = False):
    if json_mode:
        return JsonProgress()
    if quiet:
        return lambda _p: None
    return RichProgress() if fancy_terminal() else PlainProgress()


class LazyProgress:
    """Progress for automatic first-use pulls: the view is built at the first event.

    Commands that never pull pay nothing; the rich bars are stopped at `ready`
    so they do not collide with the command's own live display.
    """

    def __init__(self) -> None:
        self._view = None

    def __call__(self, p: Progress) -> None:
        if self._view is None:
            self._view = RichProgress() if fancy_terminal() else PlainProgress()
        self._view(p)
        if p.phase == "ready":
            self._view.close()
            self._view = None
