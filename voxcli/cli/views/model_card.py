"""`voxcli models --info NAME`: one model's card, a two-column table on a terminal, `label: value` lines elsewhere."""
from __future__ import annotations

from typing import Any

from voxcli.cli.views.terminal import fancy_terminal
from voxcli.hub.model_cards import ModelCard, card_lines


def card_brief(card: ModelCard) -> str:
    """The card in a few words for the `voxcli models` table."""
    return f"WER {card.wer * 100:.1f} % (dev set), RTF {card.rtf:.2f}, {card.timestamps} word times, {card.streams}"


def show_card(row: Any, card: ModelCard | None) -> None:
    """The card on stdout (it is the command's data); models without a card show their catalog row."""
    rows = card_lines(card) if card is not None else [
        ("model", row.name), ("kind", row.kind), ("size", f"{row.size / 1e6:.1f} MB"), ("licence", row.license)]
    rows += [("status", row.status), ("description", row.description)]
    if card is None:
        rows.append(("card", "none (model cards describe the speech recognizers)"))
    if not fancy_terminal():
        for label, value in rows:
            print(f"{label + ':':13} {value}")
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(show_header=False, box=None, padding=(0, 1))
    t.add_column(style="bold", no_wrap=True)
    t.add_column()
    for label, value in rows:
        t.add_row(label, value)
    Console(stderr=False).print(t)
