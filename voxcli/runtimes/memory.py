"""glibc's heap policy for long runs: large buffers are mmapped and go back when freed (issue 18).

Why: glibc serves a request of at least M_MMAP_THRESHOLD bytes with its own
mmap, which `free()` unmaps at once. But that threshold is dynamic: each time
a mmapped block is freed, glibc raises it to that block's size (up to 32 MB)
and the trim threshold to twice that, so later buffers of those sizes come
from the heaps, where a live chunk above them pins the pages. Setting both
thresholds once (mallopt) turns the adjustment off, as long-running ML
servers do. Measured on the chat path (a turn every 8 s, 10-16 min, parallel
arms): 1.5-3.5 MB lower RSS than the dynamic default in each of three runs,
no measurable CPU cost at 1 MB. It is what lets a session run without
onnxruntime's arena: with it, arena-less sessions no longer fragment the heap
(arena off everywhere, 256 KB threshold: 505 vs 570 MB at 16 min; without it
the same change was 58 MB worse), though the arena stays on for its CPU.

Linux/glibc only; elsewhere (musl, macOS, Windows) these are no-ops, and a
threshold the user set (MALLOC_MMAP_THRESHOLD_, GLIBC_TUNABLES) is left alone.
"""
from __future__ import annotations

import contextlib
import functools
import os
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # pragma: no cover
    import onnxruntime as ort

MMAP_THRESHOLD: Final = 1024 * 1024
"""Bytes from which a buffer is mmapped (glibc starts at 128 KB). 1 MB keeps the many small per-run
buffers (an LLM token's logits: 192 KB) on the heap, where reuse costs no page faults: 256 KB cost
up to 25% more CPU in runs without an onnxruntime arena, 1 MB none measurable (bench in issue 18)."""
TRIM_THRESHOLD: Final = 2 * MMAP_THRESHOLD
"""Free bytes at the heap's top from which free() gives them back (glibc's own ratio to the above)."""
_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3
_USER_SETTINGS: Final = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
_USER_TUNABLES: Final = ("glibc.malloc.mmap_threshold", "glibc.malloc.trim_threshold")


@functools.lru_cache(maxsize=1)
def _mallopt():
    import ctypes

    with contextlib.suppress(OSError, AttributeError, TypeError):  # glibc only: not in musl, macOS, Windows
        mallopt = ctypes.CDLL(None).mallopt  # Windows: CDLL(None) is a TypeError; macOS: no symbol
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int  # int mallopt(int, int)
        return mallopt
    return None


def _user_tuned() -> bool:
    """True when the environment already sets glibc's thresholds (the user's choice wins)."""
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    return any(k in os.environ for k in _USER_SETTINGS) or any(t in tunables for t in _USER_TUNABLES)


@functools.lru_cache(maxsize=1)
def fix_heap_thresholds() -> bool:
    """Fix glibc's mmap and trim thresholds for this process (see the module docstring); True if set.

    Once per process (cached: later calls cost nothing); onnx.session_options calls it, so every
    command that loads a model has it before its first run. False without glibc or when the user
    set the thresholds; the process then keeps glibc's dynamic behaviour.
    """
    mallopt = _mallopt()
    if mallopt is None or _user_tuned():
        return False
    # The trim threshold first: setting either one is what turns glibc's adjustment off.
    return bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


SHRINK_KEY: Final = "memory.enable_memory_arena_shrinkage"
"""Run option: after the run, onnxruntime's CPU arena frees its regions that hold nothing (`cpu:0`)."""


@functools.lru_cache(maxsize=1)
def _shrinking():
    import onnxruntime as ort

    opts = ort.RunOptions()
    opts.add_run_config_entry(SHRINK_KEY, "cpu:0")
    return opts


def shrink_after(run_options: "ort.RunOptions | None") -> "ort.RunOptions":
    """`run_options` (or shared ones when None) that also free the arena's empty regions after the run.

    Why: an arena keeps every region it ever extended by (in doubling steps) for the session's life,
    so the longest utterance, sentence or prompt so far sets its size. Freed after each run, a region
    above the fixed mmap threshold goes straight back to the system. Chat path (a turn every 8 s,
    parallel arms, load 3-17): 518 vs 573 MB at 17 min, 514 vs 571 at 21 min, the same CPU per turn;
    a Piper synthesis alone: 2-4% more CPU, its first streamed block as fast (61 vs 57-62 ms).
    """
    if run_options is None:
        return _shrinking()
    try:
        run_options.get_run_config_entry(SHRINK_KEY)
    except RuntimeError:  # not set yet (onnxruntime's only way to ask)
        run_options.add_run_config_entry(SHRINK_KEY, "cpu:0")
    return run_options


@functools.lru_cache(maxsize=1)
def session_class() -> type:
    """onnxruntime.InferenceSession whose runs end with `shrink_after` (onnx.session's class)."""
    import onnxruntime as ort

    class Session(ort.InferenceSession):
        shrink_arena = True
        """False (`keep_arena`): runs keep the arena's regions for the next run."""

        def run(self, output_names, input_feed, run_options=None):
            return super().run(output_names, input_feed,
                               shrink_after(run_options) if self.shrink_arena else run_options)

        def run_with_iobinding(self, iobinding, run_options=None):
            return super().run_with_iobinding(iobinding,
                                              shrink_after(run_options) if self.shrink_arena else run_options)

    return Session


def keep_arena(*sessions: Any) -> tuple[Any, ...]:
    """`sessions` (None entries kept as None) whose runs no longer shrink the arena.

    For the voice: its runs are many and short (a block of frames each) and their sizes are bounded
    by the chunker's longest piece, so its arena stops growing by itself, while shrinking after every
    run cost a Piper synthesis ~7 % more CPU (0.483 vs 0.453 s median, 8 interleaved runs of a
    2-sentence text, load ~1.2) -- against issue 15's CPU budget. The LLM's and the ASR's runs vary
    with prompt and buffer length; they keep shrinking.
    """
    for s in sessions:
        if s is not None and hasattr(s, "shrink_arena"):
            s.shrink_arena = False
    return sessions
