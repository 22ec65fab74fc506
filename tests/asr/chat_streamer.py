"""Chat's streamer for the patch tests: its settings, lockstep, its captions drained, an edge watched."""
from __future__ import annotations

import threading
from typing import Any

from voxcli.asr.streamer import ASRStreamer
from voxcli.runtimes.silero_vad import SileroVAD


def chat_streamer(model: Any, vad_path: Any, edge: str,
                  captions: list | None = None) -> tuple[ASRStreamer, threading.Event]:
    """A streamer as chat makes it (hold from the speech), lockstep (deterministic), whose captions a thread
    drains (into `captions` when given); the event is set at the first `edge` ("start" or "end") of an utterance."""
    s = ASRStreamer(model, SileroVAD.load(vad_path), hold_from="speech", tail_from_speech=True, lockstep=True)
    seen = threading.Event()
    s.subscribe(lambda ev: seen.set() if getattr(ev, "kind", None) == edge else None)
    threading.Thread(target=lambda: (captions if captions is not None else []).extend(s.captions), daemon=True).start()
    return s, seen
