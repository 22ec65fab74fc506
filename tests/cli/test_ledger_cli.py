"""`voxcli ledger` and `voxcli ledger schedule` through typer's CliRunner (stdout and stderr apart)."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from voxcli.cli.app import app


@pytest.fixture
def runner(tmp_path, monkeypatch) -> CliRunner:
    monkeypatch.setenv("VOXCLI_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("VOXCLI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COLUMNS", "100")
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 always separates them
        return CliRunner()


def test_ledger_json_default_preset(runner):
    r = runner.invoke(app, ["ledger", "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["total_ms"] == 1045.0
    assert doc["critical_parallel"] == "asr_tail_ms"
    assert doc["sensitivity_ms"]["endpoint_ms"] == 0.0
    assert doc["sources"]["llm_ttft_ms"] == "preset"
    assert [s["term"] for s in doc["segments"]][:3] == ["uplink_ms", "endpoint_ms", "asr_tail_ms"]
    assert r.stderr == ""


def test_ledger_waterfall_goes_to_stderr_only(runner):
    r = runner.invoke(app, ["ledger", "--sensitivity"], catch_exceptions=False)
    assert r.exit_code == 0
    assert r.stdout == ""
    assert "ASR tail is on the critical path; shortening the endpoint hold gains nothing" in r.stderr
    assert "1045" in r.stderr and "1,400 ms limit" in r.stderr
    assert "ASR tail *" in r.stderr  # the critical branch is marked
    assert "-100" in r.stderr  # sensitivity column


def test_flags_beat_config_beat_preset(runner, tmp_path):
    (tmp_path / "config.toml").write_text('[ledger]\npreset = "telephony"\nllm_ttft_ms = 500\nhops_ms = 10\n')
    r = runner.invoke(app, ["ledger", "--json", "--hops-ms", "20"], catch_exceptions=False)
    doc = json.loads(r.stdout)
    assert doc["terms"]["uplink_ms"] == 150 and doc["preset"] == "telephony"  # preset from the config
    assert doc["terms"]["llm_ttft_ms"] == 500 and doc["sources"]["llm_ttft_ms"] == "config"
    assert doc["terms"]["hops_ms"] == 20 and doc["sources"]["hops_ms"] == "flag"
    assert doc["total_ms"] == 150 + 350 + 20 + 500 + 100 + 150


def test_endpoint_longer_than_asr_tail_becomes_critical(runner):
    r = runner.invoke(app, ["ledger", "--json", "--endpoint-ms", "500"], catch_exceptions=False)
    doc = json.loads(r.stdout)
    assert doc["total_ms"] == 1195.0 and doc["critical_parallel"] == "endpoint_ms"
    assert doc["sensitivity_ms"]["asr_tail_ms"] == 0.0 and doc["sensitivity_ms"]["endpoint_ms"] == 100.0


def test_bad_preset_and_bad_config_are_one_line_usage_errors(runner, tmp_path):
    r = runner.invoke(app, ["ledger", "--preset", "moon"])
    assert r.exit_code == 2 and "unknown preset 'moon'" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "config.toml").write_text("[ledger\n")
    r = runner.invoke(app, ["ledger"])
    assert r.exit_code == 2 and "config.toml: invalid TOML" in r.stderr


def test_schedule_json_and_table(runner):
    r = runner.invoke(app, ["ledger", "schedule", "--words", "3,8,16", "--rtf", "0.9", "--overhead-ms", "60",
                            "--wpm", "150", "--json"], catch_exceptions=False)
    doc = json.loads(r.stdout)
    assert not doc["safe"]
    assert doc["chunks"][1]["underrun_s"] == pytest.approx(1.74)
    r = runner.invoke(app, ["ledger", "schedule", "--words", "3,8,16", "--rtf", "0.3"], catch_exceptions=False)
    assert r.stdout == "" and "safe" in r.stderr and "UNDERRUN" not in r.stderr
    r = runner.invoke(app, ["ledger", "schedule", "--rtf", "0.9"], catch_exceptions=False)
    assert "UNDERRUN: 1.74 s hole" in r.stderr


def test_schedule_bad_words(runner):
    r = runner.invoke(app, ["ledger", "schedule", "--words", "3,x"])
    assert r.exit_code == 2 and "--words must be comma-separated" in r.stderr


def test_environment_sits_between_flag_and_config(runner, tmp_path, monkeypatch):
    """Every ledger key goes through the one resolver: flag > VOXCLI_LEDGER_* > config > preset."""
    (tmp_path / "config.toml").write_text("[ledger]\nhops_ms = 10\nllm_ttft_ms = 500\n")
    monkeypatch.setenv("VOXCLI_LEDGER_HOPS_MS", "40")
    monkeypatch.setenv("VOXCLI_LEDGER_PRESET", "webrtc")
    doc = json.loads(runner.invoke(app, ["ledger", "--json"], catch_exceptions=False).stdout)
    assert doc["preset"] == "webrtc"
    assert doc["terms"]["hops_ms"] == 40 and doc["sources"]["hops_ms"] == "env"
    assert doc["terms"]["llm_ttft_ms"] == 500 and doc["sources"]["llm_ttft_ms"] == "config"
    doc = json.loads(runner.invoke(app, ["ledger", "--json", "--hops-ms", "5", "-p", "default"]).stdout)
    assert doc["preset"] == "default" and doc["terms"]["hops_ms"] == 5 and doc["sources"]["hops_ms"] == "flag"


def test_endpoint_ms_has_the_cli_wide_range(runner):
    """--endpoint-ms had three ranges (>= 0 here); it is 100..10000 ms in every command now."""
    r = runner.invoke(app, ["ledger", "--json", "--endpoint-ms", "50"])
    assert r.exit_code == 2 and "--endpoint-ms" in r.stderr
    assert runner.invoke(app, ["ledger", "--json", "--endpoint-ms", "100"]).exit_code == 0


def test_waterfall_is_plain_text_off_a_terminal_and_rich_on_one(capsys):
    from voxcli.bench import ledger as model
    from voxcli.cli.views.ledger import show_ledger

    led = model.compute(model.preset("default"))
    sources = {t: "preset" for t in model.TERMS}
    show_ledger(led, sources, {}, "default", sensitivity=True, fancy=False)
    plain = capsys.readouterr().err
    assert "\x1b[" not in plain
    row = next(line for line in plain.splitlines() if line.startswith("ASR tail *"))
    assert row.split()[3:6] == ["350", "preset", "100"] and "█" in row
    show_ledger(led, sources, {}, "default", sensitivity=True, fancy=True)
    rich = capsys.readouterr().err
    assert "ASR tail *" in rich and "1,400 ms limit" in rich and "-100" in rich
