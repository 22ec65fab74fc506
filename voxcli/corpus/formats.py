"""Transcript renderings: plain text, JSON, and SubRip / WebVTT subtitles.

Why utterance cues: the offline path segments by voice activity, so each
utterance has a start and an end in the recording; a cue per utterance is
what subtitle players expect (words-level timing is an estimate here).
"""
from __future__ import annotations

import json
from typing import Any, Final, Sequence

FORMATS: Final = ("txt", "json", "srt", "vtt")


def _clock(t: float, sep: str) -> str:
    ms = max(0, int(round(t * 1000)))
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def render(fmt: str, utterances: Sequence[Any], meta: dict[str, Any]) -> str:
    """The output file's text for `utterances` (objects with text, start, end)."""
    if fmt == "txt":
        return "".join(u.text + "\n" for u in utterances)
    if fmt == "json":
        body = {**meta, "utterances": [{"text": u.text, "start": round(u.start, 3), "end": round(u.end, 3)}
                                       for u in utterances]}
        return json.dumps(body, ensure_ascii=False, indent=1) + "\n"
    if fmt == "srt":
        return "".join(f"{i}\n{_clock(u.start, ',')} --> {_clock(u.end, ',')}\n{u.text}\n\n"
                       for i, u in enumerate(utterances, 1))
    if fmt == "vtt":
        return "WEBVTT\n\n" + "".join(f"{_clock(u.start, '.')} --> {_clock(u.end, '.')}\n{u.text}\n\n"
                                      for u in utterances)
    raise ValueError(f"unknown format {fmt!r}")
