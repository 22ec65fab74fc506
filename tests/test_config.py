"""The user config file loader and the data dir helper (env vars read at call time)."""
from __future__ import annotations

from pathlib import Path

import pytest

from voxcli.config import bench_history_path, config_path, data_dir, load_config, turn_log_path
from voxcli.errors import ExitCode, UsageError


@pytest.fixture
def cfg_file(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "config.toml"
    monkeypatch.setenv("VOXCLI_CONFIG", str(path))
    monkeypatch.setenv("VOXCLI_DATA_DIR", str(tmp_path / "data"))
    return path


def test_env_vars_are_read_at_call_time(cfg_file, tmp_path, monkeypatch):
    assert config_path() == cfg_file
    assert data_dir() == tmp_path / "data"
    assert not (tmp_path / "data").exists()  # reading a path never creates it
    assert data_dir(create=True).is_dir()
    monkeypatch.setenv("VOXCLI_DATA_DIR", str(tmp_path / "other"))
    assert bench_history_path() == tmp_path / "other" / "bench_history.jsonl"
    assert turn_log_path() == tmp_path / "other" / "turns.jsonl"


def test_missing_file_is_an_empty_config(cfg_file):
    cfg = load_config()
    assert not cfg.exists and cfg.bench.max_p95_ms is None and cfg.warnings == ()


def test_typed_sections(cfg_file):
    cfg_file.write_text(
        '[bench]\nmax_p50_ms = 80\nmax_p95_ms = 120.5\nruns = 3\n'
        '[ledger]\nendpoint_ms = 300\npreset = "webrtc"\n'
        '[chat]\nllm_url = "http://127.0.0.1:8080/v1"\n'
    )
    cfg = load_config()
    assert cfg.exists
    assert cfg.bench.max_p50_ms == 80.0 and isinstance(cfg.bench.max_p50_ms, float)
    assert cfg.bench.max_p95_ms == 120.5 and cfg.bench.runs == 3
    assert cfg.get("ledger.endpoint_ms") == 300.0 and cfg.ledger.preset == "webrtc"
    assert cfg.chat.llm_url == "http://127.0.0.1:8080/v1"


def test_unknown_keys_and_sections_are_warned_not_fatal(cfg_file):
    cfg_file.write_text('[bench]\nmax_p59_ms = 1\n[colour]\nx = 1\n')
    cfg = load_config()
    assert len(cfg.warnings) == 2
    assert "max_p59_ms" in cfg.warnings[0] and "max_p95_ms" in cfg.warnings[0]
    assert "[colour]" in cfg.warnings[1]
    assert cfg.bench.max_p50_ms is None


def test_bad_toml_names_the_file_and_line(cfg_file):
    cfg_file.write_text("[bench]\nmax_p95_ms = = 3\n")
    with pytest.raises(UsageError) as e:
        load_config()
    assert str(cfg_file) in e.value.message and "line 2" in e.value.message
    assert e.value.exit_code == ExitCode.USAGE


@pytest.mark.parametrize(
    "body, fragment",
    [
        ('[bench]\nmax_p95_ms = "fast"\n', "[bench] max_p95_ms must be a number"),
        ("[bench]\nruns = 2.5\n", "[bench] runs must be an integer"),
        ("[bench]\nmax_p95_ms = true\n", "must be a number"),
        ("[tts]\nvoice = 3\n", "[tts] voice must be a string"),
        ("bench = 3\n", "bench must be a [bench] table"),
    ],
)
def test_wrong_types_are_usage_errors(cfg_file, body, fragment):
    cfg_file.write_text(body)
    with pytest.raises(UsageError, match=None) as e:
        load_config()
    assert fragment in e.value.message and str(cfg_file) in e.value.message


def test_non_utf8_and_directory(cfg_file):
    cfg_file.write_bytes(b"\xff\xfe[bench]")
    with pytest.raises(UsageError, match="not UTF-8"):
        load_config()
    cfg_file.unlink()
    cfg_file.mkdir()
    with pytest.raises(UsageError, match="is a directory"):
        load_config()
