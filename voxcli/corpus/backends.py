"""Where the work runs on this machine: in this process, or in a pool of worker processes.

Why `concurrent.futures.ProcessPoolExecutor` and not threads or a home-made
scheduler: the models hold the GIL between onnxruntime calls, processes are
the standard way to use N cores from Python, and the executor already does
the hand-out and error propagation. The pool is started with "spawn" (a
fork of a process that has onnxruntime threads running is unsafe), each
worker loads the model once in its initializer, ignores SIGINT (the driver
alone handles Ctrl-C), and at most `2 * jobs` tasks are in flight, so a list
of a million files is never all submitted at once (back-pressure).

A worker that dies breaks the whole executor (every task in flight fails
with BrokenProcessPool), so the pool is replaced and those tasks are
retried, at most MAX_RETRIES times each, as Ray retries an actor's calls.

Every backend has the same shape: `map(tasks)` yields `Outcome`s in
completion order, and `close()` stops the workers.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Final, Iterable, Iterator, Protocol

from voxcli.corpus.work import Outcome, Task, WorkerSpec, check_model, load, run

MAX_RETRIES: Final = 2
"""Retries of a task whose worker process died (Ray's actors get the same from `max_task_retries`)."""


class Backend(Protocol):
    workers: int

    def map(self, tasks: Iterable[Task]) -> Iterator[Outcome]: ...
    def close(self) -> None: ...


class InlineBackend:
    """`--jobs 1`: the model in this process, one item after the other."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec, self.workers = spec, 1
        load(spec)  # a missing model fails now, before any item is tried

    def map(self, tasks: Iterable[Task]) -> Iterator[Outcome]:
        for t in tasks:
            yield run(self.spec, t)

    def close(self) -> None:
        pass


def _init_worker(spec: WorkerSpec) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    load(spec)


class PoolBackend:
    """`--jobs N`: N spawned processes, each holding the model, fed with back-pressure."""

    def __init__(self, spec: WorkerSpec, jobs: int) -> None:
        self.spec, self.workers = spec, jobs
        check_model(spec)
        self._pool = self._start()

    def _start(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_init_worker, initargs=(self.spec,))

    def map(self, tasks: Iterable[Task]) -> Iterator[Outcome]:
        pending: dict[Future[Outcome], tuple[Task, ProcessPoolExecutor]] = {}
        retry: list[Task] = []
        tries: dict[str, int] = {}
        it = iter(tasks)
        exhausted = False
        while pending or retry or not exhausted:
            while (retry or not exhausted) and len(pending) < 2 * self.workers:
                t = retry.pop() if retry else next(it, None)
                if t is None:
                    exhausted = True
                    break
                try:
                    pending[self._pool.submit(run, self.spec, t)] = (t, self._pool)
                except BrokenProcessPool:
                    # A worker died after the last wait and the executor noticed before this
                    # submit: the pool is replaced and the task counts a try like those in
                    # flight (which bounds the loop if every new pool breaks at once).
                    out = self._broken(t, self._pool, tries)
                    if out is None:
                        retry.append(t)
                    else:
                        yield out
            if not pending:
                continue
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                task, pool = pending.pop(fut)
                out = self._outcome(fut, task, pool, tries)
                if out is None:
                    retry.append(task)
                else:
                    yield out

    def _outcome(self, fut: Future[Outcome], task: Task, pool: ProcessPoolExecutor,
                 tries: dict[str, int]) -> Outcome | None:
        """The task's outcome, or None when it must be retried (its pool broke under it)."""
        try:
            return fut.result()
        except BrokenProcessPool:
            return self._broken(task, pool, tries)

    def _broken(self, task: Task, pool: ProcessPoolExecutor, tries: dict[str, int]) -> Outcome | None:
        """A worker died (OOM killer, a crash in native code, a kill): the executor is broken
        for every task in flight, so it is replaced (once) and they are retried, up to
        MAX_RETRIES each (a file that kills its worker every time then fails)."""
        if pool is self._pool:
            pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._start()
        tries[task.key] = tries.get(task.key, 0) + 1
        if tries[task.key] <= MAX_RETRIES:
            return None
        return Outcome(task.key, False, error="the worker process died on this file, "
                                              f"{MAX_RETRIES + 1} times")

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def pids(self) -> list[int]:
        """The worker processes' ids (started on the first submit); tests kill one."""
        return list((getattr(self._pool, "_processes", None) or {}).keys())

    def abort(self) -> None:
        """Ctrl-C: end the workers now instead of letting them finish their current files.

        The executor has no public "terminate"; its process table is read defensively.
        """
        procs = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(5)


def default_jobs() -> int:
    """The cores this process may use (the affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def make_backend(spec: WorkerSpec, jobs: int | None = None, ray: str | None = None,
                 ship_audio: bool = False) -> Backend:
    """The executor a batch asks for: Ray when `ray` is given ("" or "local": a local cluster)."""
    if ray is not None:
        from voxcli.corpus.ray_backend import RayBackend

        return RayBackend(spec, jobs, address=ray, ship_audio=ship_audio)
    n = jobs or default_jobs()
    return InlineBackend(spec) if n == 1 else PoolBackend(spec, n)
