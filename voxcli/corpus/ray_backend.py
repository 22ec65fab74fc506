"""The batch over a Ray cluster: one actor per worker slot holding the model.

Why actors and not plain tasks: an actor loads the model once and keeps it
for the whole batch, as a pool worker does. Why the driver writes every
output and the manifest: workers then need read access to the inputs only
(or nothing at all with `ship_audio`, which puts each file's bytes in the
object store), and exactly one process appends to the manifest, so a
retried task can never write twice. Back-pressure: each actor has at most
two tasks queued (`ray.wait` for the first to finish before handing out
more). Fault tolerance is Ray's: an actor whose process dies is restarted
(`max_restarts`) and its in-flight calls are retried (`max_task_retries`);
the driver also drops a second result for a key it already has.

`address`: "" or "local" starts a local cluster (or joins the one this process already started) with `jobs` CPUs; anything
else is passed to `ray.init(address=...)` ("auto", "HEAD:6379", "ray://...").
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Final, Iterable, Iterator

from voxcli.corpus.work import Outcome, Task, WorkerSpec, load, run
from voxcli.errors import UsageError

PER_ACTOR: Final = 2
"""Tasks queued per actor: one running, one ready to start (no idle gap, no hoarding)."""
MAX_TASK_RETRIES: Final = 3


class CorpusWorker:
    """The actor body (wrapped by `ray.remote` at run time, so Ray stays an optional import)."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        load(spec)

    def run(self, task: Task, data: bytes | None = None) -> Outcome:
        return run(self.spec, task, data)

    def pid(self) -> int:
        return os.getpid()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("--ray needs Ray installed", hint="pip install 'voxcli[ray]'") from None
    return ray


def _local_env() -> dict[str, Any]:
    """A local cluster's workers see this process's VOXCLI_* settings (cache dir, offline)."""
    return {"env_vars": {k: v for k, v in os.environ.items() if k.startswith("VOXCLI_")}}


class RayBackend:
    """`--ray [ADDRESS]`: actors on a (local or remote) cluster, results streamed to the driver."""

    def __init__(self, spec: WorkerSpec, jobs: int | None, address: str = "", ship_audio: bool = False) -> None:
        ray = self._ray = _import_ray()
        self.spec, self.ship_audio = spec, ship_audio
        self._started = not ray.is_initialized()
        if self._started:
            kw: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
            if address in ("", "local"):
                from voxcli.corpus.backends import default_jobs

                ray.init(num_cpus=jobs or default_jobs(), runtime_env=_local_env(), **kw)
            else:
                ray.init(address=address, **kw)
        self.workers = jobs or max(1, int(ray.cluster_resources().get("CPU", 1)))
        actor = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=MAX_TASK_RETRIES)(CorpusWorker)
        self.actors = [actor.remote(spec) for _ in range(self.workers)]

    def pids(self) -> list[int]:
        """The actors' process ids (tests kill one to prove nothing is lost)."""
        return list(self._ray.get([a.pid.remote() for a in self.actors]))

    def _submit(self, task: Task, slot: int) -> Any:
        actor = self.actors[slot]
        if not self.ship_audio or self.spec.kind != "asr":
            return actor.run.remote(task)
        return actor.run.remote(task, self._ray.put(Path(task.source).read_bytes()))

    def map(self, tasks: Iterable[Task]) -> Iterator[Outcome]:
        ray = self._ray
        in_flight: dict[Any, tuple[Task, int]] = {}
        load = [0] * len(self.actors)
        seen: set[str] = set()
        it, exhausted = iter(tasks), False
        while in_flight or not exhausted:
            while not exhausted and min(load) < PER_ACTOR:
                t = next(it, None)
                if t is None:
                    exhausted = True
                    break
                slot = load.index(min(load))
                try:
                    ref = self._submit(t, slot)
                except OSError as e:  # --ship-audio: the driver cannot read the file
                    yield Outcome(t.key, False, error=f"{t.source}: cannot read ({e.strerror or e})")
                    continue
                in_flight[ref] = (t, slot)
                load[slot] += 1
            if not in_flight:
                break
            (ref,), _ = ray.wait(list(in_flight), num_returns=1)
            task, slot = in_flight.pop(ref)
            load[slot] -= 1
            out = self._get(ref, task)
            if out.key not in seen:
                seen.add(out.key)
                yield out

    def _get(self, ref: Any, task: Task) -> Outcome:
        try:
            return self._ray.get(ref)
        except Exception as e:  # noqa: BLE001 - the actor died past its retries, or the cluster went away
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            return Outcome(task.key, False, error=f"ray: {first}")

    def close(self) -> None:
        for a in self.actors:
            try:
                self._ray.kill(a)
            except Exception:  # noqa: BLE001 - already gone
                pass
        if self._started:
            self._ray.shutdown()
