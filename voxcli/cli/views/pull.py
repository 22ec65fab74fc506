"""Views of `voxcli pull`'s module (pull, models, rm): the `models` table, rich on a terminal, plain lines otherwise."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from voxcli.cli.errors import err
from voxcli.cli.views.terminal import fancy_terminal
from voxcli.hub.resolve import ModelRow

_STYLE = {"package": "green", "installed": "green", "missing": "yellow"}


def _fmt_size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n else "-"


def show_models(rows: Sequence[ModelRow], cache_root: Path) -> None:
    """Print the table on stdout (it is the command's data); the legend goes to stderr."""
    if not fancy_terminal():
        for r in rows:
            print(f"{r.name + ('*' if r.default else ''):26} {r.kind:5} {_fmt_size(r.size):>9}  "
                  f"{r.license:11} {r.status:9} {r.description}")
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"models (cache: {cache_root})", title_justify="left")
    for col in ("name", "kind", "size", "licence", "status", "description"):
        t.add_column(col, no_wrap=col != "description")
    for r in rows:
        t.add_row(r.name + (" [bold]*[/]" if r.default else ""), r.kind, _fmt_size(r.size),
                  r.license, f"[{_STYLE[r.status]}]{r.status}[/]", r.description)
    Console(stderr=False).print(t)
    err("* default model")
