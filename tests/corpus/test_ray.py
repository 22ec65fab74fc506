"""The batch over a real local Ray cluster (2 CPUs): same results as --jobs 1, a killed worker loses nothing."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import voxcli
from tests.conftest import REAL_CACHE
from tests.corpus.conftest import make_tree
from voxcli.corpus.asr_job import TranscribeJob
from voxcli.corpus.batch import run_batch
from voxcli.corpus.inputs import expand
from voxcli.corpus.manifest import MANIFEST_NAME
from voxcli.corpus.progress import FileResult
from voxcli.corpus.work import WorkerSpec

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster():
    """One local cluster for the module (starting one costs seconds); its workers use the real model cache."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"VOXCLI_CACHE_DIR": str(REAL_CACHE)}})
    yield
    ray.shutdown()


def _texts(out: Path) -> dict[str, str]:
    return {p.relative_to(out).as_posix(): p.read_text() for p in sorted(out.rglob("*.txt"))}


@pytest.fixture
def corpus(tmp_path: Path, speech_samples, real_cache) -> tuple[Path, Path]:
    """Seven files (six good, one corrupt) and their --jobs 1 transcripts as the reference."""
    tree = make_tree(tmp_path / "in", speech_samples, copies=3, corrupt=True)
    ref = tmp_path / "ref"
    list(voxcli.transcribe_many([str(tree)], ref, jobs=1))
    return tree, ref


def test_killing_a_worker_mid_batch_loses_and_duplicates_nothing(cluster, corpus, tmp_path: Path):
    from voxcli.corpus.ray_backend import RayBackend

    tree, ref = corpus
    out = tmp_path / "out"
    spec = WorkerSpec("asr")
    backend = RayBackend(spec, 2, "local")
    before = backend.pids()  # now: a busy actor answers only after its queued files
    job = TranscribeJob(expand([str(tree)]), out, "txt", spec)
    results: list[FileResult] = []
    for e in run_batch(job, lambda: backend):
        if isinstance(e, FileResult):
            results.append(e)
            if len(results) == 1:
                os.kill(before[0], signal.SIGKILL)  # the other files of that actor are in flight
    keys = [r.key for r in results]
    assert len(keys) == len(set(keys)) == 7
    assert sorted(r.key for r in results if r.status == "failed") == ["broken.txt"]
    assert _texts(out) == _texts(ref) and len(_texts(out)) == 6
    lines = (out / MANIFEST_NAME).read_text().splitlines()
    assert len(lines) == 7  # one record per file: the retried task was not written twice
    assert {r.worker.split(":")[1] for r in results[1:] if r.status == "done"} - {str(p) for p in before}, \
        "a restarted actor (new process) took over the killed one's files"


def test_ship_audio_gives_the_same_transcripts(cluster, corpus, tmp_path: Path):
    tree, ref = corpus
    out = tmp_path / "shipped"
    res = list(voxcli.transcribe_many([str(tree)], out, jobs=2, ray="local", ship_audio=True))
    assert _texts(out) == _texts(ref)
    (bad,) = [r for r in res if r.status == "failed"]
    assert bad.error.startswith(str(tree / "broken.wav")) and "voxcli-shipped" not in bad.error
