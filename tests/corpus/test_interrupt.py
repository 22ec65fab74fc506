"""Ctrl-C in the middle of `voxcli transcribe DIR --out-dir`: exit 130, a consistent manifest, then a resume."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.corpus.conftest import make_tree
from voxcli.corpus.manifest import MANIFEST_NAME


def _transcribe(*args: str) -> list[str]:
    return [sys.executable, "-m", "voxcli", "transcribe", *args]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_leaves_a_consistent_manifest_and_a_rerun_finishes(tmp_path: Path, speech_samples, real_cache,
                                                                  jobs: str):
    tree = make_tree(tmp_path / "in", speech_samples, copies=4)
    out = tmp_path / "out"
    p = subprocess.Popen(_transcribe(str(tree), "--out-dir", str(out), "--jobs", jobs, "--json"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert p.stdout is not None
        for line in p.stdout:
            if json.loads(line).get("status") == "done":
                p.send_signal(signal.SIGINT)  # after the first file: the others are pending or in progress
                break
        rest = p.communicate(timeout=120)[0]
    finally:
        p.kill()
    assert p.returncode == 130, p.stderr.read() if p.stderr else ""
    first = [json.loads(x) for x in (out / MANIFEST_NAME).read_text().splitlines()]
    done = {r["key"] for r in first if r["status"] == "done"}
    assert 1 <= len(done) < 8 and rest is not None
    for key in done:  # every "done" line names a complete output
        assert (out / key).read_text().strip()
    assert not [q for q in out.rglob("*") if q.name.endswith(".tmp")]  # no half-written file left behind
    r = subprocess.run(_transcribe(str(tree), "--out-dir", str(out), "--jobs", jobs, "--json"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    events = [json.loads(x) for x in r.stdout.splitlines()]
    status = {e["key"]: e["status"] for e in events if e["event"] == "file"}
    assert {k for k, s in status.items() if s == "skipped"} == done
    assert len(status) == 8 and set(status.values()) <= {"skipped", "done"}
    assert len(list(out.rglob("*.txt"))) == 8
