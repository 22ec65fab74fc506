"""`voxcli bench asr` on real speech: the figures are produced and the ratchet holds."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tests.asr_checks import BECKETT_REF, caption_retractions
from voxcli.cli.app import app
from voxcli.bench.asr import commit_delays
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
    assert s["step_ms"] == 500  # no --step-ms: the model's own step (moonshine-tiny-en: the engine default)


def test_an_explicit_step_wins_over_the_models(speech_samples, tmp_path) -> None:
    ref = tmp_path / "beckett.txt"
    ref.write_text(BECKETT_REF)
    r = CliRunner().invoke(app, ["bench", "asr", str(speech_samples["beckett"]), "--ref", str(ref), "--speed", "0",
                                 "--step-ms", "700", "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["summary"]["step_ms"] == 700 and doc["files"][0]["step_ms"] == 700


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
    assert caption_retractions(caps) == 1  # the recount test_flicker holds ASRStats.retractions to
    # hello: seen 1.0, stable 2.0; world: seen (same word) 1.5, stable 2.5; hi: 0
    assert commit_delays(caps) == [1.0, 1.0, 0.0]


def test_asr_model_from_the_config_is_used(speech_samples, tmp_path, isolated_env) -> None:
    """Before: `bench asr` ignored every asr.* setting and always benchmarked the default model."""
    (isolated_env / "config.toml").write_text('[asr]\nmodel = "no-such-asr-model"\n')
    ref = tmp_path / "beckett.txt"
    ref.write_text(BECKETT_REF)
    r = CliRunner().invoke(app, ["bench", "asr", str(speech_samples["beckett"]), "--ref", str(ref), "--speed", "0"])
    assert r.exit_code == 3, r.stderr
    assert "unknown asr model 'no-such-asr-model'" in r.stderr


def test_endpoint_from_the_environment_and_the_plain_view(speech_samples, tmp_path, monkeypatch) -> None:
    """asr.endpoint_ms reaches the streamer (env beats the built-in 500 ms), and without a terminal
    the summary is plain text: no rich table, no escape codes (before: rich only)."""
    monkeypatch.setenv("VOXCLI_ASR_ENDPOINT_MS", "700")
    ref = tmp_path / "beckett.txt"
    ref.write_text(BECKETT_REF)
    r = CliRunner().invoke(app, ["bench", "asr", str(speech_samples["beckett"]), "--ref", str(ref), "--speed", "0"],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    assert "model moonshine-tiny-en, endpoint 700 ms, step 500 ms, agreement 2, speed 0" in r.stderr
    lines = r.stderr.splitlines()
    assert any(line.startswith("streaming WER ") for line in lines), r.stderr
    assert any(line.split() == ["retractions", "0"] for line in lines), r.stderr
    assert "\x1b[" not in r.stderr and "━" not in r.stderr and "┃" not in r.stderr


def test_endpoint_ms_has_the_cli_wide_range(speech_samples) -> None:
    """--endpoint-ms took any value >= 100 here, 100..5000 in chat and >= 0 in ledger."""
    r = CliRunner().invoke(app, ["bench", "asr", str(speech_samples["beckett"]), "--endpoint-ms", "20000"])
    assert r.exit_code == 2 and "--endpoint-ms" in r.stderr


def test_summary_views_agree_and_the_plain_one_needs_no_rich() -> None:
    """The same rows in both renderings; the plain path never imports rich (checked in a fresh process)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from voxcli.cli.views.bench import show_asr\n"
        f"show_asr({SUMMARY!r}, 'm', fancy=False)\n"
        "print('rich' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
    assert "streaming WER" in r.stderr and "commit delay p95" in r.stderr and "12.5%" in r.stderr


def test_rich_summary_has_the_same_rows(capsys) -> None:
    from voxcli.cli.views.bench import show_asr

    show_asr(SUMMARY, "m", fancy=True)
    err = capsys.readouterr().err
    assert "streaming WER" in err and "commit delay p95" in err and "12.5%" in err and "endpoint 500 ms" in err


SUMMARY = {
    "event": "bench_asr", "files": 1, "audio_s": 9.5, "ref_words": 12, "batch_wer": 0.0, "stream_wer": 0.125,
    "retractions": 0, "commit_delay_p50_s": 0.5, "commit_delay_p95_s": 1.0, "worker_rtf": 0.2, "max_lag_s": 0.4,
    "peak_rss_mb": 300.0, "speed": 0.0, "step_ms": 500, "agreement": 2, "endpoint_ms": 500,
}


def test_two_models_side_by_side_in_one_run(speech_samples, tmp_path) -> None:
    """`-m A -m B`: the single-model schema for A, plus both models under "models" (issue 16)."""
    from tests.whisper.conftest import installed

    installed("whisper-tiny-en")
    ref = tmp_path / "beckett.txt"
    ref.write_text(BECKETT_REF)
    r = CliRunner().invoke(app, ["bench", "asr", str(speech_samples["beckett"]), "--ref", str(ref), "--speed", "0",
                                 "-m", "moonshine-tiny-en", "-m", "whisper-tiny-en", "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["model"] == "moonshine-tiny-en" and doc["summary"] == doc["models"][0]["summary"]
    assert [m["model"] for m in doc["models"]] == ["moonshine-tiny-en", "whisper-tiny-en"]
    for m in doc["models"]:
        assert set(m["summary"]) >= set(SUMMARY) | {"emitted_wer", "final_delay_p50_s"}
        assert m["files"][0]["file"] == "beckett.wav" and m["summary"]["emitted_wer"] <= 0.1
        assert m["summary"]["batch_wer"] <= 0.1 and m["summary"]["retractions"] == 0
        assert m["summary"]["peak_rss_mb"] > 50 and m["load_s"] > 0
    assert "moonshine-tiny-en: beckett.wav" in r.stderr and "whisper-tiny-en: beckett.wav" in r.stderr


def test_compare_view_has_a_row_per_model(capsys) -> None:
    from voxcli.cli.views.bench import show_asr_compare

    show_asr_compare([("moonshine-tiny-en", 0.3, SUMMARY), ("whisper-tiny-en", 1.2, {**SUMMARY, "batch_wer": 0.05})],
                     fancy=False)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("bench asr: 2 models, 1 file(s)")
    rows = {line.split()[0]: line.split() for line in lines if line.split() and line.split()[0].endswith("-en")}
    assert rows["moonshine-tiny-en"][1:3] == ["0.0%", "12.5%"] and rows["whisper-tiny-en"][1] == "5.0%"


def test_each_model_row_shows_its_own_step_and_agreement(speech_samples, tmp_path) -> None:
    """Before: the compare header printed the first model's agreement n for every model; base streams at
    its catalog step 750 / n 4, tiny at 500 / 2, so each row carries its own "step" and "n"."""
    from tests.whisper.conftest import installed

    installed("moonshine-base-en")
    ref = tmp_path / "beckett.txt"
    ref.write_text(BECKETT_REF)
    r = CliRunner().invoke(app, ["bench", "asr", str(speech_samples["beckett"]), "--ref", str(ref), "--speed", "0",
                                 "-m", "moonshine-tiny-en", "-m", "moonshine-base-en"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    lines = r.stderr.splitlines()
    header = next(line.split() for line in lines if line.split()[:1] == ["model"])
    rows = {line.split()[0]: line.split() for line in lines if line.split()[:1] in (["moonshine-tiny-en"],
                                                                                   ["moonshine-base-en"])}
    assert header[header.index("step") + 1] == "n"
    step_n = {m: row[row.index("ms") - 1 : row.index("ms") + 2] for m, row in rows.items()}  # only step is in ms
    assert step_n == {"moonshine-tiny-en": ["500", "ms", "2"], "moonshine-base-en": ["750", "ms", "4"]}
    assert not any("agreement" in line for line in lines if line.startswith("endpoint"))


def test_end_of_speech_to_final_on_scripted_captions() -> None:
    from voxcli.bench.asr import final_delays

    caps = [Caption("a", "", True, 3.0, 3.4, 0), Caption("b", "", False, 5.0, 5.1, 1), Caption("b c", "", True, 8.0, 8.3, 1),
            Caption("d", "", True, 9.0, 9.5, 2)]
    ends = {0: 2.5, 1: 7.5}  # utterance 2 ended with the input: no confirmed endpoint, no figure
    assert final_delays(caps, ends, speed=1.0) == pytest.approx([0.9, 0.8])
    assert final_delays(caps, ends, speed=2.0) == pytest.approx([2.15, 4.55])
    assert final_delays(caps, ends, speed=0.0) == []  # lockstep: no wall clock to compare with
