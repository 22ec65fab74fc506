"""What `voxcli chat` shows: the user's live caption, the reply as spoken, per-turn latencies.

Three renderings of the same agent events: rich (a TTY: the caption line is
live, stable words normal and volatile words grey), plain lines (pipes, CI,
NO_COLOR), and JSON lines on stdout (`--json`, the same field names).
"""
from __future__ import annotations

import json
import sys
import threading
from typing import Any

from voxcli.chat.agent import BargeIn, Notice, Spoken, TurnStart
from voxcli.chat.turnlog import TurnRecord
from voxcli.cli.errors import quiet_broken_pipe
from voxcli.cli.views.terminal import fancy_terminal
from voxcli.events import Caption


def latency_line(rec: TurnRecord) -> str:
    """`endpoint 512 · ASR final 640 · LLM first token +149 · first audio 906 ms after you stopped`."""
    def ms(v: float | None) -> str:
        return "—" if v is None else f"{v:,.0f}"

    t = rec.terms
    parts = [
        f"endpoint {ms(rec.endpoint_ms)}",
        f"ASR final {ms(rec.asr_final_ms)}",
        f"LLM first token {ms(rec.llm_first_token_ms)} (ttft {ms(t.get('llm_ttft_ms'))})",
        f"first audio {ms(rec.first_audio_ms)} ms",
    ]
    flags = (" [interrupted]" if rec.interrupted else "") + (" [cut off]" if rec.cut_off else "")
    return "  turn %d: " % rec.turn + " · ".join(parts) + flags


class PlainChatView:
    """One line per finished thing, on stderr."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._speaking = False

    def _line(self, text: str) -> None:
        with self._lock:
            if self._speaking:
                print(file=sys.stderr)
                self._speaking = False
            print(text, file=sys.stderr, flush=True)

    def __call__(self, ev: Any) -> None:
        if isinstance(ev, Caption):
            if ev.is_final and ev.stable:
                self._line(f"you: {ev.stable}")
        elif isinstance(ev, TurnStart):
            with self._lock:
                print("bot:", end="", file=sys.stderr, flush=True)
                self._speaking = True
        elif isinstance(ev, Spoken):
            with self._lock:
                print(" " + ev.text.strip(), end="", file=sys.stderr, flush=True)
                self._speaking = True
        elif isinstance(ev, BargeIn):
            self._line(f"  [barge-in: you said {ev.user_words!r}; kept {ev.heard!r}]")
        elif isinstance(ev, Notice):
            self._line(f"  [{ev.kind}: {ev.message}]")
        elif isinstance(ev, TurnRecord):
            self._line(latency_line(ev))

    def close(self) -> None:
        with self._lock:
            if self._speaking:
                print(file=sys.stderr, flush=True)
                self._speaking = False


class RichChatView(PlainChatView):
    """The caption line updates in place; finished lines scroll above it."""

    def __init__(self) -> None:
        super().__init__()
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        self._Text = Text
        self.console = Console(stderr=True)
        self._caption = Text("")
        self._reply = Text("")
        self._live = Live(self._render(), console=self.console, refresh_per_second=12, transient=True)
        self._live.start()

    def _render(self) -> Any:
        from rich.console import Group

        return Group(self._caption, self._reply)

    def _line(self, text: Any) -> None:
        self.console.print(text)

    def __call__(self, ev: Any) -> None:
        T = self._Text
        if isinstance(ev, Caption):
            if ev.is_final:
                self._caption = T("")
                if ev.stable:
                    self._line(T.assemble(("you: ", "bold cyan"), ev.stable))
            else:
                self._caption = T.assemble(("you: ", "bold cyan"), ev.stable + " ", (ev.volatile, "grey50"))
        elif isinstance(ev, TurnStart):
            self._reply = T.assemble(("bot: ", "bold green"))
        elif isinstance(ev, Spoken):
            self._reply.append(" " + ev.text.strip())
        elif isinstance(ev, BargeIn):
            self._flush_reply()
            self._line(T(f"  ✋ barge-in: kept {ev.heard!r}", style="yellow"))
        elif isinstance(ev, Notice):
            self._line(T(f"  [{ev.kind}] {ev.message}", style="yellow" if ev.kind != "error" else "red"))
        elif isinstance(ev, TurnRecord):
            self._flush_reply()
            self._line(T(latency_line(ev), style="dim"))
        self._live.update(self._render())

    def _flush_reply(self) -> None:
        if self._reply.plain.strip() not in ("", "bot:"):
            self._line(self._reply)
        self._reply = self._Text("")

    def close(self) -> None:
        self._flush_reply()
        self._live.stop()


class JsonChatView:
    """JSON lines on stdout (every event), plus the human view on stderr if any."""

    def __init__(self, human: PlainChatView | None) -> None:
        self.human = human
        self._lock = threading.Lock()
        self.broken = False

    def __call__(self, ev: Any) -> None:
        if hasattr(ev, "to_json"):
            self.emit(ev.to_dict())
        if self.human is not None:
            self.human(ev)

    def emit(self, obj: dict) -> None:
        with self._lock:
            if self.broken:
                return
            try:
                sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
                sys.stdout.flush()
            except BrokenPipeError:
                # The reader went away (`| head`): stop writing, let the worker's
                # error end the run; the CLI maps BrokenPipeError to a quiet exit 0.
                self.broken = True
                quiet_broken_pipe()
                raise

    def close(self) -> None:
        if self.human is not None:
            self.human.close()


def chat_view(*, json_lines: bool, quiet: bool) -> Any:
    human: PlainChatView | None = None
    if not quiet:
        human = RichChatView() if fancy_terminal() else PlainChatView()
    if json_lines:
        return JsonChatView(human)
    return human if human is not None else _Silent()


class _Silent:
    def __call__(self, ev: Any) -> None:
        pass

    def close(self) -> None:
        pass
