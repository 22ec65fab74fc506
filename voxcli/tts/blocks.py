"""Block-size scheduling for intra-sentence streaming: grow blocks only as fast as RTF allows.

Why: small vocoder blocks give a low time-to-first-audio, but each block pays
for its look-back/look-ahead context and a model call, so later blocks should
be large. A block may only be as large as can be computed before the audio
already queued runs out: RTF x A(k+1) + overhead <= buffered audio (which is
at least A(k) right after block k was emitted). The RTF and the per-call
overhead are measured as the stream runs (a shared 2-core machine is not
the machine of the benchmark), so the sizes adapt to the load. A block of n
frames is decoded with `context` more (the voice's lookback + lookahead,
thrown away), so it costs like n + context frames: counting that keeps the
small first blocks from looking several times slower per frame than they are,
which made the next blocks small too (more blocks, more context, more CPU).
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class BlockScheduler:
    """Choose the next block size (latent frames) from the audio buffered ahead of the player."""

    first_frames: int
    """Size when nothing is playing yet (the first block of the stream)."""
    max_frames: int
    """Upper bound: beyond it, larger blocks no longer pay off."""
    frame_s: float
    """Seconds of audio per latent frame (hop / sample rate)."""
    safety: float = 2.0
    """Only plan to spend 1/safety of the buffered audio (noisy, shared CPU)."""
    overhead_s: float = 0.015
    """Fixed cost per block (context frames, model call); refined by `observe`."""
    smoothing: float = 0.3
    """Weight of a new measurement in the running averages."""
    rtf: float | None = None
    """Measured seconds of compute per second of decoded audio, context included (None until the first block)."""
    context: int = 0
    """Frames decoded with every block besides its own (lookback + lookahead)."""

    def observe(self, frames: int, seconds: float) -> None:
        """Record that a block of `frames` took `seconds` to compute."""
        if frames <= 0:
            return
        sample = seconds / ((frames + self.context) * self.frame_s)
        self.rtf = sample if self.rtf is None else (1 - self.smoothing) * self.rtf + self.smoothing * sample

    def next_frames(self, buffered_s: float) -> int:
        """Largest block that is ready before `buffered_s` of queued audio has played."""
        if buffered_s <= 0 or self.rtf is None:
            return self.first_frames
        budget = buffered_s / self.safety - self.overhead_s
        if budget <= 0:
            return self.first_frames
        frames = math.floor(budget / (max(self.rtf, 1e-3) * self.frame_s)) - self.context
        return max(self.first_frames, min(self.max_frames, frames))
