"""ASRStats: the figures one `ASRStreamer` keeps (also its `--json` final record)."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class ASRStats:
    """Worker figures of one stream (also the `--json` final record)."""

    audio_s: float = 0.0
    """Audio received."""
    decode_s: float = 0.0
    """Worker seconds spent in the model (re-decodes, cuts, finals)."""
    decodes: int = 0
    """Model calls (re-decodes, cuts and finals)."""
    skipped: int = 0
    """Re-decodes skipped because the worker was behind."""
    max_lag_s: float = 0.0
    """Most audio left waiting behind the worker (0 in lockstep mode)."""
    max_buffer_s: float = 0.0
    """Longest utterance buffer decoded at once (bounded by `max_buffer_s` of the streamer)."""
    cuts: int = 0
    """Times the buffer was cut inside an utterance (no pause long enough)."""
    utterances: int = 0
    """Utterances committed with text."""
    total_s: float = 0.0
    """Wall time of the worker, first audio to end."""
    dropped_s: float = 0.0
    """Live audio dropped unheard because the worker fell `max_pending_s` behind (`send(block=False)`)."""
    retractions: int = 0
    """Updates whose stable words did not extend the shown ones: flicker with `agreement=1`; for any n,
    a final decode that corrects a committed word (the final is authoritative)."""
    flicker_words: int = 0
    """Shown stable words those retractions took back (gone from the new text)."""
    speculations: int = 0
    """Final decodes started at silence onset, during the endpoint hold."""
    speculations_dropped: int = 0
    """Of those, dropped because speech resumed (or the buffer changed) before the hold ended."""

    def to_dict(self) -> dict:
        d = {"event": "asr_stats", **asdict(self), "rtf": self.rtf}
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in d.items()}

    @property
    def rtf(self) -> float:
        """Real-time factor of the model work (decode seconds per audio second)."""
        return self.decode_s / self.audio_s if self.audio_s else 0.0
