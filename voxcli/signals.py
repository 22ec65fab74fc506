"""Hold Ctrl-C and SIGTERM across a few steps that must happen together.

A batch writes a file's output, then the manifest line that says it is done.
A Ctrl-C landing between the two (Python raises KeyboardInterrupt between any
two bytecodes of the main thread) leaves an output nobody recorded, and the
next run cannot tell it from somebody else's file: it keeps it instead of
skipping it. `signals_held()` records a signal that arrives inside the block
and delivers it, to whatever handler was installed, right after the block.
The block must be short (a rename and one appended line): the user's Ctrl-C
waits for it.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator

HELD = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def signals_held() -> Iterator[None]:
    """Run the block with SIGINT/SIGTERM postponed to its end (main thread only; elsewhere a no-op,
    since only the main thread receives Python signal handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous: dict[int, Any] = {}

    def hold(signum: int, frame: Any) -> None:
        pending.append(signum)

    try:
        for sig in HELD:
            previous[sig] = signal.signal(sig, hold)
    except (ValueError, OSError):  # an embedding that forbids handlers: nothing to hold
        for sig, old in previous.items():
            signal.signal(sig, old)
        yield
        return
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)
        for sig in dict.fromkeys(pending):  # each held signal once, in arrival order
            signal.raise_signal(sig)


__all__ = ["signals_held"]
