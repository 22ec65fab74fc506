"""Hold Ctrl-C and SIGTERM across a few steps that must happen together.

A batch writes a file's output, then the manifest line that says it is done.
A Ctrl-C landing between the two (Python raises KeyboardInterrupt between any
two bytecodes of the main thread) leaves an output nobody recorded, and the
next run cannot tell it from somebody else's file: it keeps it instead of
skipping it. `signals_held()` records a signal that arrives inside the block
and delivers it, to whatever handler was installed, right after the block.
The block must be short (writing one output and one appended line): the
user's first Ctrl-C waits for it; a second one of the same signal is
delivered at once, for a disk that hangs.
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
        if signum not in pending:
            pending.append(signum)
            return
        pending.remove(signum)  # the same signal again: the user insists, it is delivered now (once)
        old = previous.get(signum)
        if callable(old):
            old(signum, frame)
        elif old != signal.SIG_IGN:
            raise KeyboardInterrupt

    try:
        for sig in HELD:
            previous[sig] = signal.signal(sig, hold)
    except (ValueError, OSError):  # an embedding that forbids handlers: nothing to hold
        _restore(previous)
        yield
        return
    try:
        yield
    finally:
        _restore(previous)
        for sig in list(pending):  # each held signal once, in arrival order
            signal.raise_signal(sig)


def _restore(previous: dict[int, Any]) -> None:
    """Put every handler back, even when a signal arriving meanwhile raises between two of them."""
    failed: BaseException | None = None
    for sig, old in previous.items():
        while True:
            try:
                signal.signal(sig, old if old is not None else signal.SIG_DFL)
                break
            except BaseException as e:  # noqa: BLE001 - a KeyboardInterrupt from the handler just restored
                failed = failed or e
    if failed is not None:
        raise failed


__all__ = ["signals_held"]
