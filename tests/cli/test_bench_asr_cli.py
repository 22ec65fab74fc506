"""`voxcli bench asr` on real speech: the figures are produced and the ratchet holds."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.asr_checks import BECKETT_REF
from voxcli.cli.app import app
from voxcli.bench.asr import commit_delays, retractions
from voxcli.events import Caption

pytestmark = pytest.mark.usefixtures("real_cache")


def test_bench_asr_json_on_beckett(speech_samples, tmp_path) -> None:
    ref = tmp_path / "beckett.txt"
    ref.write_text(BECKETT_REF)
    r = CliRunner().invoke(app, ["bench", "asr", str(speech_samples["beckett"]), "--ref", str(ref), "--speed", "0", "--json"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    s = doc["summary"]
    assert s["retractions"] == 0 and s["ref_words"] == 12
    assert s["batch_wer"] <= 0.1 and s["stream_wer"] <= s["batch_wer"] + 0.01
    assert 0 <= s["commit_delay_p50_s"] <= s["commit_delay_p95_s"] <= 2.0
    assert s["worker_rtf"] > 0 and s["peak_rss_mb"] > 50
    assert doc["files"][0]["file"] == "beckett.wav"


def test_bench_asr_needs_one_ref_per_file(speech_samples, tmp_path) -> None:
    r = CliRunner().invoke(app, ["bench", "asr", str(speech_samples["beckett"]), "--ref", str(tmp_path / "no.txt")])
    assert r.exit_code == 2 and "no such reference file" in r.stderr


def test_metrics_on_scripted_captions() -> None:
    caps = [
        Caption("", "hello wor", False, 1.0, 0, 0),
        Caption("", "hello world", False, 1.5, 0, 0),
        Caption("hello", "world", False, 2.0, 0, 0),
        Caption("hello world", "", True, 2.5, 0, 0),
        Caption("hi", "", False, 3.0, 0, 1),
        Caption("h", "", True, 3.5, 0, 1),  # a retraction
    ]
    assert retractions(caps) == 1
    # hello: seen 1.0, stable 2.0; world: seen (same word) 1.5, stable 2.5; hi: 0
    assert commit_delays(caps) == [1.0, 1.0, 0.0]
