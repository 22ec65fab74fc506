"""One table, two renderings: rich on a terminal, aligned plain text everywhere else.

Why: the `bench` and `ledger` views used to build rich tables only, so a log
(`voxcli bench asr ... 2>log`, CI, NO_COLOR) got rich's layout and the command
modules imported rich themselves. A view now builds its rows once as a `Grid`
of cells and text lines; `show()` renders them with rich when
`fancy_terminal()` says so and as plain, space-aligned lines otherwise. The
plain path never imports rich.

A cell is a string, a `(text, style)` pair, or a list of such pairs (a bar
whose characters have different colours); styles are rich style names that
the plain rendering ignores.
"""
from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence, Union

from voxcli.cli.views.terminal import fancy_terminal

Styled = tuple[str, str]
Cell = Union[str, Styled, list[Styled]]


@dataclass(frozen=True)
class Column:
    header: str
    justify: Literal["left", "right"] = "left"
    style: str = ""
    """Rich style of the whole column (ignored in plain text)."""


@dataclass
class Grid:
    """Rows of cells under named columns; `None` in `rows` separates sections."""

    columns: list[Column]
    rows: list[tuple[list[Cell], str] | None] = field(default_factory=list)
    show_header: bool = True

    def add(self, *cells: Cell, style: str = "") -> None:
        """One row; `style` applies to every cell of it (rich only)."""
        padded = list(cells) + [""] * (len(self.columns) - len(cells))
        self.rows.append((padded, style))

    def section(self) -> None:
        self.rows.append(None)


Part = Union[Grid, Cell]
"""What a view shows: tables and lines of text, in order."""


def text_of(cell: Cell) -> str:
    """The characters of a cell, without styles."""
    if isinstance(cell, str):
        return cell
    if isinstance(cell, tuple):
        return cell[0]
    return "".join(text for text, _ in cell)


def plain_lines(grid: Grid) -> list[str]:
    """The grid as lines of text, columns two spaces apart, numbers right-aligned."""
    rows = [[text_of(c) for c in row[0]] for row in grid.rows if row is not None]
    header = [c.header for c in grid.columns]
    widths = [max([len(r[i]) for r in rows + ([header] if grid.show_header else [])] or [0])
              for i in range(len(grid.columns))]

    def line(cells: Sequence[str]) -> str:
        out = [c.rjust(w) if col.justify == "right" else c.ljust(w)
               for c, w, col in zip(cells, widths, grid.columns)]
        return "  ".join(out).rstrip()

    lines = [line(header)] if grid.show_header else []
    for row in grid.rows:
        if row is None:
            if lines and lines[-1]:
                lines.append("")
            continue
        lines.append(line([text_of(c) for c in row[0]]))
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _rich_text(cell: Cell, style: str = "") -> Any:
    from rich.text import Text

    if isinstance(cell, str):
        return Text(cell, style=style)
    if isinstance(cell, tuple):
        return Text(cell[0], style=cell[1] or style)
    text = Text(style=style)
    for chunk, chunk_style in cell:
        text.append(chunk, style=chunk_style or None)
    return text


def _rich_table(grid: Grid) -> Any:
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold", show_header=grid.show_header)
    for col in grid.columns:
        table.add_column(col.header, justify=col.justify, style=col.style or None, no_wrap=True, overflow="crop")
    for row in grid.rows:
        if row is None:
            table.add_section()
        else:
            cells, style = row
            table.add_row(*(_rich_text(c) for c in cells), style=style or None)
    return table


def terminal_width(default: int = 100) -> int:
    """Columns of the terminal (or $COLUMNS), without asking rich."""
    return shutil.get_terminal_size((default, 24)).columns


def show(parts: Sequence[Part], *, fancy: bool | None = None) -> None:
    """Print the parts on stderr: rich on a terminal, plain lines otherwise (stdout is for data)."""
    if fancy is None:
        fancy = fancy_terminal(sys.stderr)
    if fancy:
        from rich.console import Console

        console = Console(stderr=True, highlight=False)
        for part in parts:
            console.print(_rich_table(part) if isinstance(part, Grid) else _rich_text(part))
        return
    lines: list[str] = []
    for part in parts:
        lines += plain_lines(part) if isinstance(part, Grid) else [text_of(part)]
    print("\n".join(lines), file=sys.stderr, flush=True)
