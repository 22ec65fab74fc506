"""One Silero pass per frame for a whole conversation.

Why: `chat` needs speech probabilities twice -- the ASR streamer segments
utterances with them, and the agent times turns (speech end, endpoint) and
decides barge-in (a sustained speech run) with them. Scoring every 32 ms frame
twice costs a second model run per frame on cores the LLM and the voice need
(issue 13, item 7). `SharedVAD` wraps the one scorer the streamer owns and
hands each batch of probabilities to listeners (the agent) as the streamer
computes them: same frames, same order, one pass.

The listeners run on the streamer's worker thread, right after the scores
exist: an agent's endpoint stamp is then the moment the engine's endpointer
could fire, and its speech-end stamp (a sample index) is exact. Listeners must
be quick and must not raise (an exception is reported to `on_error`, never to
the streamer).
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

Listener = Callable[[np.ndarray], None]


class SharedVAD:
    """A `FrameScorer` (reset/probs) that also tells its listeners every batch of scores."""

    def __init__(self, scorer: Any, on_error: Callable[[BaseException], None] | None = None) -> None:
        self.scorer = scorer
        self.on_error = on_error
        self.passes = 0
        """Frames scored (one model run each): the test that there is only one pass."""
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    @property
    def session(self) -> Any:
        """The scorer's onnxruntime session (thread checks read its options)."""
        return getattr(self.scorer, "session", None)

    def listen(self, fn: Listener) -> None:
        """Call `fn(probs)` with every batch of frame probabilities from now on."""
        with self._lock:
            self._listeners.append(fn)

    def reset(self) -> None:
        self.scorer.reset()

    def probs(self, chunk: np.ndarray) -> np.ndarray:
        p = self.scorer.probs(chunk)
        self.passes += len(p)
        if len(p):
            with self._lock:
                listeners = list(self._listeners)
            for fn in listeners:
                try:
                    fn(p)
                except BaseException as e:  # noqa: BLE001 - the streamer must go on; the owner is told
                    if self.on_error is not None:
                        self.on_error(e)
        return p
