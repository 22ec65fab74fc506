"""How `--help` renders: two fixes to typer's rich help, applied once when the app is built.

Both are general causes of bugs seen in single commands:

- Option help is plain text. The app uses `rich_markup_mode="rich"` so that
  command help can say `[bold]Examples[/bold]`, but typer parses each
  option's help as markup too, so "default: config [chat] llm_url" lost
  `[chat]` (rich took it for a tag). We escape option and argument help
  before typer renders it; a `\\[` someone wrote by hand is kept as `[`.
- Boolean flags show no type: typer 0.2x prints `--raw <bool>` (and
  `--help <bool>`), as if the flag took a value.

This module lives under views/ because it is the one place, with the other
views, that touches rich.
"""
from __future__ import annotations

from typing import Any


def literal_help(text: str) -> str:
    """Option help as rich markup that renders exactly `text` (a hand-written `\\[` counts as `[`)."""
    from rich.markup import escape

    return escape(text.replace("\\[", "["))


def patch_help_rendering() -> None:
    """Install both fixes on typer (idempotent; a typer without these hooks is left alone).

    The option-help fix patches `typer.rich_utils`, which imports rich: that
    import (~90 ms) waits until help is rendered, so `voxcli speak` does not pay
    for it before its first audio.
    """
    import sys

    from typer.core import TyperCommand, TyperGroup, TyperOption

    show_type = getattr(TyperOption, "display_type_rich", None)
    if show_type is not None and not getattr(show_type, "_voxcli", False):
        def display_type_rich(self: Any, ctx: Any) -> Any:
            return None if getattr(self, "is_flag", False) else show_type(self, ctx)

        display_type_rich._voxcli = True  # type: ignore[attr-defined]
        TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]

    if "typer.rich_utils" in sys.modules:
        _patch_option_help()
        return
    for cls in (TyperCommand, TyperGroup):
        fmt = getattr(cls, "format_help", None)
        if fmt is None or getattr(fmt, "_voxcli", False):
            continue

        def format_help(self: Any, ctx: Any, formatter: Any, _fmt: Any = fmt) -> Any:
            _patch_option_help()
            return _fmt(self, ctx, formatter)

        format_help._voxcli = True  # type: ignore[attr-defined]
        cls.format_help = format_help  # type: ignore[method-assign]


def _patch_option_help() -> None:
    """Option and argument help is escaped before typer's rich help parses it as markup (idempotent)."""
    from typer import rich_utils

    param_help = getattr(rich_utils, "_get_parameter_help", None)
    if param_help is not None and not getattr(param_help, "_voxcli", False):
        def get_parameter_help(*, param: Any, ctx: Any, markup_mode: Any) -> Any:
            text = getattr(param, "help", None)
            if not text or markup_mode != "rich":
                return param_help(param=param, ctx=ctx, markup_mode=markup_mode)
            param.help = literal_help(text)
            try:
                return param_help(param=param, ctx=ctx, markup_mode=markup_mode)
            finally:
                param.help = text

        get_parameter_help._voxcli = True  # type: ignore[attr-defined]
        rich_utils._get_parameter_help = get_parameter_help
