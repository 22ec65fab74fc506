"""`voxcli doctor` results: coloured lines on a terminal, plain lines elsewhere, JSON lines with --json."""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import Any

from voxcli.cli.views.terminal import fancy_terminal

_MARK = {"ok": "ok", "warn": "WARN", "fail": "FAIL"}
_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


class CheckView:
    """Shows one check result as it finishes (called from `run_checks(on_result=...)`)."""

    def __init__(self, *, json_out: bool, quiet: bool) -> None:
        self.json_out = json_out
        self.quiet = quiet
        self.console: Any = None
        if not json_out and fancy_terminal():
            from rich.console import Console

            self.console = Console(stderr=True, highlight=False)

    def __call__(self, r: Any) -> None:
        if self.json_out:
            print(json.dumps(asdict(r)), flush=True)
            return
        if self.quiet and r.status == "ok":
            return
        if self.console is not None:
            from rich.markup import escape

            self.console.print(f"[{_STYLE[r.status]}]{_MARK[r.status]:>4}[/] [bold]{r.name:<11}[/] {escape(r.summary)}")
            if r.fix:
                self.console.print(f"{'':>4} {'':<11} [dim]fix:[/] {escape(r.fix)}")
            return
        print(f"{_MARK[r.status]:>4} {r.name:<11} {r.summary}", file=sys.stderr, flush=True)
        if r.fix:
            print(f"{'':>4} {'':<11} fix: {r.fix}", file=sys.stderr, flush=True)
