"""Chat's streamer for the patch tests: its settings, lockstep, its captions drained, an edge watched."""
from __future__ import annotations

import threading
from typing import Any

from voxcli.asr.streamer import ASRStreamer
from voxcli.runtimes.silero_vad import SileroVAD


def chat_streamer(model: Any, vad_path: Any, edge: str,
                  captions: list | None = None) -> tuple[ASRStreamer, threading.Event]:
    """A streamer as chat makes it (hold from the speech), lockstep (deterministic), whose captions a thread
    drains (into `captions` when given, then None once they ended); the event is set at the first `edge` ("start"
    or "end") of an utterance."""
    s = ASRStreamer(model, SileroVAD.load(vad_path), hold_from="speech", tail_from_speech=True, lockstep=True)
    seen = threading.Event()
    s.subscribe(lambda ev: seen.set() if getattr(ev, "kind", None) == edge else None)
    def drain() -> None:
        for c in s.captions:
            if captions is not None:
                captions.append(c)
        if captions is not None:
            captions.append(None)

    threading.Thread(target=drain, daemon=True).start()
    return s, seen
