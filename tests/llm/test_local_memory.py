"""Memory of the on-device LLM over a long chat (issue 18): freed C-heap pages go back after every reply.

Why these checks and not an RSS-over-many-turns bound: resident memory of a
whole chat moves with the load of the machine (how often the preemptive and
the final reply overlap), so a bound either flakes or proves nothing. What is
deterministic: `release_free_memory` returns free heap pages that glibc keeps
(shown with pages that only it can give back: holes between live chunks), and
every generation calls it once when it ends, however it ends. The long-run
figures are measured by benchmarks/bench_memory.py (chat path).
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import voxcli.runtimes.smollm.local as runtime
from voxcli.runtimes import onnx
from voxcli.runtimes.smollm.local import GGUF_FILE, LocalLLM

glibc_only = pytest.mark.skipif(onnx._malloc_trim() is None, reason="malloc_trim is glibc's (Linux)")


MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_MAX_",
              "MALLOC_PERTURB_"}
"""glibc settings that change where a 16 KB block lives, when it goes back, or what free() writes in it."""


def _allocator_changed() -> str:
    """Why glibc's default heap is not what `malloc` gives here ('' when it is): the hole test assumes it."""
    tuned = sorted(k for k in os.environ if k in MALLOC_ENV or (k == "GLIBC_TUNABLES" and "malloc" in os.environ[k]))
    if tuned:  # e.g. MALLOC_MMAP_THRESHOLD_ below 16 KB: the holes are mmapped and free() unmaps them
        return f"glibc malloc tuned by {', '.join(tuned)}"
    preload = os.environ.get("LD_PRELOAD", "")
    if any(name in preload for name in ("jemalloc", "tcmalloc", "mimalloc")):
        return f"another malloc is preloaded (LD_PRELOAD={preload})"
    return ""


HOLES = r"""
import ctypes, os, sys
from voxcli.runtimes import memory, onnx
memory.fix_heap_thresholds()  # the heap policy every voxcli command has once it makes a session
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
hole, n = 16 * 1024, 6400
big, pins = [0] * n, [0] * n  # sized up front: a list's buffer freed while growing would hold later pins
for i in range(n):  # 100 MB of 16 KB holes, each pinned by a small live chunk after it
    big[i] = libc.malloc(hole)
    ctypes.memset(big[i], 1, hole)  # resident
    pins[i] = libc.malloc(64)
for p in big:
    libc.free(p)
def kept(fd):  # the middle byte of a hole lies in a whole page of it; glibc writes links only at a chunk's start
    n = 0
    for p in big:
        try:
            n += os.pread(fd, 1, p + hole // 2) == b"\x01"
        except OSError:  # unmapped (read through /proc/self/mem: an error, not a crash): given back
            pass
    return n
with open("/proc/self/mem", "rb", buffering=0) as mem:
    print(n, kept(mem.fileno()), onnx.release_free_memory(), kept(mem.fileno()))
"""


@glibc_only
@pytest.mark.skipif(bool(_allocator_changed()), reason=_allocator_changed() or "glibc malloc")
def test_release_free_memory_gives_back_pages_that_free_keeps():
    """Checked by content, not by RSS: RSS is the whole process's (other threads, swap under memory
    pressure), while a page the kernel took back reads as zeros whatever the load (MADV_DONTNEED on
    private memory), and one glibc kept still holds what was written. In a fresh interpreter: in a
    long test process, earlier frees decide where the pins land and which heap the holes are in."""
    done = subprocess.run([sys.executable, "-c", HOLES], capture_output=True, text=True, timeout=300, check=True)
    n, before, released, after = done.stdout.split()
    assert int(before) >= 0.9 * int(n)  # free() cannot return a hole below a live chunk: it keeps it
    assert released == "True"
    assert int(after) <= 0.1 * int(n)  # >= 90% of the holes' pages went back


def test_release_free_memory_is_harmless_anywhere(monkeypatch):
    monkeypatch.setattr(onnx, "_malloc_trim", lambda: None)  # a platform without glibc
    assert onnx.release_free_memory() is False


@pytest.fixture(scope="module")
def engine(llm_bundle) -> LocalLLM:
    return LocalLLM.load(llm_bundle.file(GGUF_FILE), llm_bundle.derived_dir)


@pytest.fixture
def releases(monkeypatch) -> list[int]:
    calls: list[int] = []

    def spy() -> bool:
        calls.append(1)
        return onnx.release_free_memory()

    monkeypatch.setattr(runtime, "release_free_memory", spy)
    return calls


MESSAGES = [{"role": "user", "content": "Name three colours."}]


def test_every_generation_releases_memory_once_however_it_ends(engine, releases):
    assert len(list(engine.start(MESSAGES, max_new_tokens=4))) <= 4  # ran to its end
    assert len(releases) == 1

    gen = iter(engine.start(MESSAGES, max_new_tokens=4))  # abandoned after one token (chat's warm-up)
    next(gen)
    assert not releases[1:]  # not while it runs
    gen.close()
    assert len(releases) == 2

    gen = iter(engine.start(MESSAGES, max_new_tokens=4))  # cancelled (barge-in)
    next(gen)
    engine.cancel()
    assert list(gen) == []
    assert len(releases) == 3


def test_overlapping_generations_each_release(engine, releases):
    first = iter(engine.start(MESSAGES, max_new_tokens=3))
    next(first)  # holds the shared cache: the second gets a private one
    second = list(engine.start(MESSAGES + [{"role": "assistant", "content": "Red."},
                                           {"role": "user", "content": "Two more."}], max_new_tokens=3))
    assert len(second) <= 3 and len(releases) == 1
    list(first)
    assert len(releases) == 2
