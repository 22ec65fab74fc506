"""Rich renderables for live captions (`voxcli transcribe`), with a plain fallback.

On a terminal: finished utterances scroll above a live region holding the
current line (stable words normal, volatile words grey) and a status line
(audio time, worker RTF, lag). Elsewhere (pipes, CI, NO_COLOR): only stable
words, appended as they commit, one line per utterance -- never a word that
later changes, so a log reads like the transcript.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import IO, Protocol

from voxcli.cli.views.terminal import fancy_terminal
from voxcli.events import Caption


@dataclass(frozen=True)
class StreamStatus:
    """What the status line shows."""

    audio_s: float
    rtf: float
    lag_s: float
    source: str = ""
    dropped_s: float = 0.0
    """Live audio dropped because the worker fell behind (shown only when > 0: the drop-behind policy is visible)."""


class CaptionView(Protocol):
    prints_finals: bool
    """True when the view itself prints each finished utterance where the user reads stdout
    (the rich view on a terminal): the command then does not print it a second time."""

    def update(self, cap: Caption, status: StreamStatus) -> None: ...
    def close(self) -> None: ...


class NullCaptionView:
    """`--quiet`: shows nothing (stdout still gets the committed lines)."""

    prints_finals = False

    def update(self, cap: Caption, status: StreamStatus) -> None:
        pass

    def close(self) -> None:
        pass


class PlainCaptionView:
    """Appends newly stable words to a text stream; ends the line at each final."""

    prints_finals = False

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self._shown = ""
        self._open = False

    def update(self, cap: Caption, status: StreamStatus) -> None:
        if cap.is_final and cap.stable and self._shown and not cap.stable.startswith(self._shown):
            # The final decode re-spelled or corrected words already shown: end that line and
            # show the authoritative final whole, rather than losing its tail (H-asr request 2).
            self.stream.write("\n" + cap.stable + "\n")
            self.stream.flush()
            self._shown, self._open = "", False
            return
        if cap.stable.startswith(self._shown) and len(cap.stable) > len(self._shown):
            self.stream.write(cap.stable[len(self._shown) :].lstrip() if not self._shown else cap.stable[len(self._shown) :])
            self._shown, self._open = cap.stable, True
        if cap.is_final:
            if self._open:
                self.stream.write("\n")
            self._shown, self._open = "", False
        self.stream.flush()

    def close(self) -> None:
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
        self._open = False


class RichCaptionView:
    """rich Live on stderr: history above, current caption (stable + grey volatile) and status below."""

    def __init__(self, echo_finals: bool = True) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console(stderr=True, highlight=False)
        self.echo_finals = echo_finals
        self.prints_finals = echo_finals
        self._cap: Caption | None = None
        self._status = StreamStatus(0.0, 0.0, 0.0)
        # stdout stays ours: the live view must never capture the transcript lines.
        self._live = Live(self._render(), console=self.console, refresh_per_second=12,
                          transient=True, redirect_stdout=False, redirect_stderr=False)
        self._live.start()

    def _render(self):
        from rich.console import Group
        from rich.text import Text

        line = Text()
        if self._cap is not None and not self._cap.is_final:
            line.append(self._cap.stable)
            if self._cap.volatile:
                line.append((" " if self._cap.stable else "") + self._cap.volatile, style="grey50")
        s = self._status
        status = Text(f"{s.audio_s:7.1f} s audio  ·  worker RTF {s.rtf:.2f}  ·  lag {s.lag_s:.1f} s"
                      + (f"  ·  {s.dropped_s:.1f} s dropped" if s.dropped_s else "")
                      + (f"  ·  {s.source}" if s.source else ""), style="dim")
        return Group(line if line.plain else Text("…", style="grey50"), status)

    def update(self, cap: Caption, status: StreamStatus) -> None:
        self._cap, self._status = cap, status
        if cap.is_final and cap.stable and self.echo_finals:
            self._live.console.print(cap.stable)
        self._live.update(self._render())

    def close(self) -> None:
        self._live.stop()


def caption_view(stdout_is_terminal: bool) -> CaptionView:
    """The rich view on a terminal, the plain one elsewhere.

    When stdout is the same terminal, finished lines are printed by the view
    only (stdout would tear the live region); otherwise stdout gets them.
    """
    if fancy_terminal(sys.stderr):
        return RichCaptionView(echo_finals=True)
    return PlainCaptionView(sys.stderr)


def failure(r) -> str:
    """`input: error`, without naming the input twice (decoder errors start with the path)."""
    return r.error if r.error and r.error.startswith(r.input) else f"{r.input}: {r.error}"


class PlainBatchView:
    """Corpus batches off a terminal: a line per failure or kept file, a progress line every few seconds.

    Why throttled: a log of ten thousand files needs the failures and a pulse, not a line per success.
    """

    def __init__(self, stream: IO[str] | None = None, every_s: float = 5.0) -> None:
        import time

        self.stream, self.every_s, self._clock = stream or sys.stderr, every_s, time.monotonic
        self._last = self._clock()

    def file(self, r) -> None:  # a voxcli.corpus.progress.FileResult
        if r.status == "failed":
            self.stream.write(f"FAILED {failure(r)}\n")
        elif r.status == "kept":
            self.stream.write(f"kept {r.output}: {r.error}\n")
        self.stream.flush()

    def progress(self, p, final: bool = False) -> None:  # a voxcli.corpus.progress.Progress
        if final or self._clock() - self._last >= self.every_s:
            self._last = self._clock()
            self.stream.write(p.line() + "\n")
            self.stream.flush()

    def close(self) -> None:
        pass


class RichBatchView(PlainBatchView):
    """On a terminal: failures scroll above one live progress line."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        super().__init__()
        self._text = Text
        self.console = Console(stderr=True, highlight=False)
        self._live = Live(Text("starting…", style="dim"), console=self.console, refresh_per_second=4,
                          transient=True, redirect_stdout=False, redirect_stderr=False)
        self._live.start()

    def file(self, r) -> None:
        if r.status in ("failed", "kept"):
            self._live.console.print(self._text(f"FAILED {failure(r)}" if r.status == "failed" else
                                                f"kept {r.output}: {r.error}",
                                                style="red" if r.status == "failed" else "yellow"))

    def progress(self, p, final: bool = False) -> None:
        self._live.update(self._text(p.line(), style="dim"))
        if final:
            self.close()
            self.console.print(p.line())

    def close(self) -> None:
        self._live.stop()


def batch_view(quiet: bool) -> PlainBatchView | None:
    """The progress display of a corpus batch (None when --quiet or --json)."""
    if quiet:
        return None
    return RichBatchView() if fancy_terminal(sys.stderr) else PlainBatchView(sys.stderr)
