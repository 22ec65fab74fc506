"""A resumed batch whose files were done with another model says why it redoes them.

The usual cause is not in the command: `voxcli pull moonshine-base-en` makes the accurate tier the
default where it keeps real time, so yesterday's `transcribe DIR --out-dir OUT` redoes today what
the fast tier did. Real models on real speech, the CLI as a subprocess.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.corpus.conftest import make_tree
from voxcli.asr.models import DEFAULT_ASR, default_asr
from voxcli.corpus.manifest import MANIFEST_NAME


def _transcribe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "voxcli", "transcribe", *args, "--jobs", "1", "--json"],
                          capture_output=True, text=True, timeout=300)


def _models(out: Path) -> set[str]:
    """The models of the manifest's records (its last line per key wins)."""
    last = {r["key"]: r for r in map(json.loads, (out / MANIFEST_NAME).read_text().splitlines())}
    return {r["model"] for r in last.values()}


def test_files_done_with_another_model_are_redone_with_a_warning(tmp_path: Path, speech_samples, real_cache):
    tree = make_tree(tmp_path / "in", {"beckett": speech_samples["beckett"], "two_cities": speech_samples["beckett"]})
    out = tmp_path / "out"
    first = _transcribe(str(tree), "--out-dir", str(out), "--model", "moonshine-base-en")
    assert first.returncode == 0, first.stderr
    assert "warning" not in first.stderr  # nothing done before
    # Other outputs in the same dir (json, not txt) are not this run's items: nothing of theirs is redone.
    json_run = _transcribe(str(tree), "--out-dir", str(out), "--model", DEFAULT_ASR, "--format", "json")
    assert json_run.returncode == 0 and "warning" not in json_run.stderr, json_run.stderr
    again = _transcribe(str(tree), "--out-dir", str(out), "--model", DEFAULT_ASR)
    assert again.returncode == 0, again.stderr
    assert (f"warning: 2 file(s) in {out} were done with moonshine-base-en; they are redone with "
            f"{DEFAULT_ASR}\n") in again.stderr  # the model was named: no advice to keep them
    events = [json.loads(x) for x in again.stdout.splitlines()]
    assert events[0] == {"event": "model_change", "model": DEFAULT_ASR, "before": {"moonshine-base-en": 2}}
    assert {e["status"] for e in events if e["event"] == "file"} == {"done"}
    assert _models(out) == {DEFAULT_ASR}
    # No model named: the default of this machine (its measured tier) decides, and the line says how to keep.
    third = _transcribe(str(tree), "--out-dir", str(out))
    assert third.returncode == 0, third.stderr
    if default_asr() == DEFAULT_ASR:
        assert "warning" not in third.stderr
    else:
        assert (f"warning: 2 file(s) in {out} were done with {DEFAULT_ASR}; they are redone with {default_asr()} "
                f"(the default here); --model {DEFAULT_ASR} keeps them") in third.stderr
    forced = _transcribe(str(tree), "--out-dir", str(out), "--model", "moonshine-base-en", "--force")
    assert forced.returncode == 0 and "warning" not in forced.stderr  # --force redoes everything, as asked
