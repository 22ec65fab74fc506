"""glibc's heap thresholds stay fixed once voxcli sets them (issue 18), read back by behaviour, not by RSS.

Why this check and not an RSS bound: resident memory of a long chat moves with the machine's load, so a
bound either flakes or proves nothing (benchmarks/bench_memory.py measures it). What is deterministic, in
a fresh single-threaded interpreter: glibc counts its mmapped blocks (mallinfo's `hblks`). By default,
freeing an 8 MB mmapped block raises the mmap threshold above 8 MB, so the next 8 MB block comes from the
heap; with the thresholds fixed it is mmapped again, and so given back when freed.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from voxcli.runtimes import memory, onnx

glibc_only = pytest.mark.skipif(memory._mallopt() is None, reason="mallopt is glibc's (Linux)")

PROBE = r"""
import ctypes, sys
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
class Info(ctypes.Structure):  # struct mallinfo: ten ints; hblks (the 4th) = blocks glibc mmapped
    _fields_ = [(n, ctypes.c_int) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                            "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo.restype = Info
if sys.argv[1] == "fix":
    from voxcli.runtimes import memory
    print(memory.fix_heap_thresholds(), memory.fix_heap_thresholds())
else:
    print("-")
big = 8 << 20
mmapped = []
for _ in range(2):  # the same 8 MB block twice: glibc's dynamic threshold changes where the second one lives
    before = libc.mallinfo().hblks
    p = libc.malloc(big)
    mmapped.append(libc.mallinfo().hblks - before)
    libc.free(p)
print(*mmapped)
"""


def _probe(mode: str, **env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("MALLOC_") and k not in ("GLIBC_TUNABLES", "LD_PRELOAD")}
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=120,
                          env={**clean, **env}, check=True)
    return done.stdout.split()


@glibc_only
def test_glibc_by_default_moves_a_freed_large_block_size_to_the_heap():
    """The behaviour being fixed, shown on this glibc (so the next test proves something here)."""
    assert _probe("default") == ["-", "1", "0"]


@glibc_only
def test_fixed_thresholds_keep_large_blocks_mmapped_after_a_free():
    assert _probe("fix") == ["True", "True", "1", "1"]  # set (idempotently), and the second block is mmapped too


@glibc_only
def test_a_threshold_the_user_set_is_left_alone():
    assert _probe("fix", MALLOC_MMAP_THRESHOLD_="131072")[:2] == ["False", "False"]
    assert _probe("fix", GLIBC_TUNABLES="glibc.malloc.trim_threshold=131072")[:2] == ["False", "False"]


def test_without_glibc_it_is_a_no_op(monkeypatch):
    monkeypatch.setattr(memory, "_mallopt", lambda: None)  # a platform without glibc
    memory.fix_heap_thresholds.cache_clear()
    try:
        assert memory.fix_heap_thresholds() is False
    finally:
        memory.fix_heap_thresholds.cache_clear()


def test_every_session_policy_fixes_the_thresholds(monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(memory, "fix_heap_thresholds", lambda: calls.append(1) or True)
    onnx.session_options(1)
    assert calls == [1]


def test_runs_give_back_the_arenas_empty_regions_and_compute_the_same(vad_bundle):
    """Every policy session's run carries the arena-shrink option (the caller's own options too, kept
    otherwise), and its results are those of a plain onnxruntime session."""
    import numpy as np
    import onnxruntime as ort

    model = vad_bundle.file("silero_vad.onnx")
    sess = onnx.session(model, threads=1, cache=False)
    plain = ort.InferenceSession(str(model), sess_options=onnx.session_options(1), providers=list(onnx.PROVIDERS))
    assert isinstance(sess, memory.session_class()) and isinstance(sess, ort.InferenceSession)
    x = np.sin(np.arange(576, dtype=np.float32) / 7.0)[None, :]
    feeds = {"input": x, "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}
    mine = ort.RunOptions()
    mine.log_severity_level = 3
    got = [sess.run(None, feeds), sess.run(None, feeds, mine), sess.run(None, feeds, mine)]  # twice: no re-add
    assert mine.get_run_config_entry(memory.SHRINK_KEY) == "cpu:0" and mine.log_severity_level == 3
    assert memory.shrink_after(None).get_run_config_entry(memory.SHRINK_KEY) == "cpu:0"
    want = plain.run(None, feeds)
    for out in got:
        assert all(np.array_equal(a, b) for a, b in zip(out, want))


def test_the_voice_keeps_its_arena_and_other_sessions_shrink(vad_bundle):
    """The voice's many short, bounded runs keep their arena (shrinking cost a synthesis ~7 % CPU);
    a session left alone (LLM, ASR, VAD) still shrinks after each run."""
    import numpy as np
    import onnxruntime as ort

    from voxcli.tts.streamer import load_voice

    voice = load_voice(threads=1)
    engine = getattr(voice, "engine", voice)
    parts = [s for s in (getattr(engine, n, None) for n in ("_front", "_flow", "_decoder", "_whole")) if s is not None]
    assert parts and all(isinstance(s, memory.session_class()) and s.shrink_arena is False for s in parts)

    model = vad_bundle.file("silero_vad.onnx")
    sess = onnx.session(model, threads=1, cache=False)
    assert sess.shrink_arena is True
    kept = onnx.session(model, threads=1, cache=False)
    assert memory.keep_arena(kept, None) == (kept, None) and kept.shrink_arena is False
    feeds = {"input": np.zeros((1, 576), np.float32), "state": np.zeros((2, 1, 128), np.float32),
             "sr": np.array(16000, np.int64)}
    mine = ort.RunOptions()
    kept.run(None, feeds, mine)
    with pytest.raises(RuntimeError):  # onnxruntime's only answer for an entry never set
        mine.get_run_config_entry(memory.SHRINK_KEY)
    sess.run(None, feeds, mine)
    assert mine.get_run_config_entry(memory.SHRINK_KEY) == "cpu:0"
