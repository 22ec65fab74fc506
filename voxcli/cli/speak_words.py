"""`voxcli speak`'s word side: the text sent (for char spans), subtitles, and which live view to show.

Kept apart from `voxcli.cli.speak` (the wiring of streamer, sinks and view)
so that command stays short; the word times themselves come from the TTS
layer (`voxcli.tts.words`), the cues from `voxcli.tts.subtitles`, the SRT /
WebVTT rendering from `voxcli.corpus.formats` (shared with `transcribe`).
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Sequence

from voxcli.errors import UsageError

SUBTITLE_SUFFIXES = (".srt", ".vtt")


class SentText:
    """The text given to the voice so far: word char spans point into it (subtitles, the word view).

    Kept only when `keep` (an argument is in memory anyway; stdin only for --subtitles): endless
    piped input must stay flat in memory, and the word view then shows the spoken words.
    """

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self._parts: list[str] = []
        self._joined = ""
        self._lock = threading.Lock()  # the stdin feeder adds, the view's refresh thread reads

    def add(self, piece: str) -> None:
        if self.keep:
            with self._lock:
                self._parts.append(piece)

    def text(self) -> str:
        with self._lock:
            if self._parts:
                self._joined += "".join(self._parts)
                self._parts = []
            return self._joined


def check_subtitles(path: Path | None) -> None:
    """Before any model loads: a .srt/.vtt name whose directory can take the file."""
    if path is None:
        return
    from voxcli.audio.files import check_output_path

    if path.suffix.lower() not in SUBTITLE_SUFFIXES:
        raise UsageError(f"cannot write subtitles {path}: use a .srt or .vtt file name")
    check_output_path(path)


def write_subtitles(path: Path, words: Sequence[Any], text: str) -> None:
    """SRT or WebVTT (by suffix) cues from the word times, written atomically (the transcript renderer)."""
    from voxcli.corpus.formats import render
    from voxcli.fsutil import atomic_write
    from voxcli.tts.subtitles import cues

    atomic_write(path, render(path.suffix.lower().lstrip("."), cues(words, text), {}))


def heard_s(player: Any) -> float:
    """Stream seconds the listener has heard, from the player's DAC stamps (`Player.heard`)."""
    return player.heard() / float(player.sample_rate)


def pick_view(player: Any, sent: SentText, quiet: bool, json_out: bool, table: bool) -> Any:
    """Word highlighting in time with the speaker on a TTY; the chunk table with --table/--verbose,
    without a speaker (-o, --raw) or off a terminal; nothing with --quiet/--json."""
    if quiet or json_out:
        return None
    from voxcli.cli.views.tts import chunk_view, word_view  # here: `--raw --quiet` starts without the views

    if not table and player is not None:
        view = word_view(sent.text, lambda: heard_s(player))
        if view is not None:
            return view
    return chunk_view()
