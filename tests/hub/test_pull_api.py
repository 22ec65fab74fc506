"""`voxcli.pull()` from Python: one pipeline for catalog names, URLs and local paths.

Against the real loopback server (tests/hub/loopback.py) and the real default
voice's bytes, like tests/hub/test_pull.py; these tests drive the library,
not the CLI, because that is what issue 12 asked for: the library could not
`pull(url)` since URL-vs-name was decided in `cli/pull.py`.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import voxcli
from tests.hub.test_pull import CONFIG, ONNX, _setup_wheel_model, _sha, _targz, read_voice
from voxcli.cli.app import app
from voxcli.errors import ExitCode, IntegrityError, ModelNotFoundError, UsageError
from voxcli.hub.cache import Cache
from voxcli.hub.resolve import installed_bundle, list_models, resolve_model

runner = CliRunner()


voice_bytes = pytest.fixture(scope="module")(read_voice)


def _cache() -> Path:
    return Path(os.environ["VOXCLI_CACHE_DIR"])


def _leftovers() -> list[Path]:
    """Files a failed pull must not leave: staging dirs and scratch blobs (locks and resumable parts may stay)."""
    tmp = _cache() / "tmp"
    return list(tmp.iterdir()) if tmp.is_dir() else []


def test_library_pull_takes_a_catalog_name_a_url_and_a_local_path(server, voice_bytes, tmp_path, monkeypatch):
    _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    seen: list[str] = []
    b = voxcli.pull("test-voice", on_progress=lambda p: seen.append(p.phase))
    assert b.origin == "cache" and b.file(ONNX).read_bytes() == voice_bytes[ONNX]
    assert seen[0] == "resolve" and seen[-1] == "ready" and "verify" in seen

    bundle = _targz({f"joe/{ONNX}": voice_bytes[ONNX], f"joe/{CONFIG}": voice_bytes[CONFIG]})
    url = server.add("/v.tar.gz", bundle)
    b = voxcli.pull(url, name="from-url", sha256=_sha(bundle))
    assert b.kind == "tts" and sorted(b.files) == [ONNX, CONFIG]
    assert json.loads((b.path / "manifest.json").read_text())["sources"] == [url]

    (tmp_path / "my-voice.tar.gz").write_bytes(bundle)
    monkeypatch.chdir(tmp_path)
    b = voxcli.pull("./my-voice.tar.gz")  # the name comes from the file name
    assert b.name == "my-voice" and b.file(CONFIG).read_bytes() == voice_bytes[CONFIG]
    assert resolve_model("my-voice", kind="tts", offline=True).path == _cache() / "models" / "my-voice"
    assert _leftovers() == []


def test_a_local_archive_with_the_wrong_sha256_installs_nothing(voice_bytes, tmp_path):
    archive = tmp_path / "v.tar.gz"
    archive.write_bytes(_targz({ONNX: voice_bytes[ONNX][:1000], CONFIG: voice_bytes[CONFIG]}))
    with pytest.raises(IntegrityError) as e:
        voxcli.pull(str(archive), sha256="0" * 64)
    assert "sha256 mismatch" in e.value.message and e.value.exit_code == ExitCode.INTEGRITY
    assert installed_bundle("v") is None and _leftovers() == []


def test_a_url_whose_name_is_taken_needs_force(server, voice_bytes):
    """The same URL again is "already installed" (issue 18 item 8); another source under the name needs --force."""
    url = server.add("/data.bin", b"first")
    assert voxcli.pull(url, name="blob").file("data.bin").read_bytes() == b"first"
    server.add("/data.bin", b"second")
    assert voxcli.pull(url, name="blob").file("data.bin").read_bytes() == b"first"  # not downloaded again
    assert len(server.gets("/data.bin")) == 1
    other = server.add("/other/data.bin", b"other")
    with pytest.raises(UsageError, match="already installed from another source"):
        voxcli.pull(other, name="blob")
    assert voxcli.pull(url, name="blob", force=True).file("data.bin").read_bytes() == b"second"


def test_what_a_source_is_is_decided_by_the_library(server, tmp_path):
    with pytest.raises(UsageError, match="catalog model"):
        voxcli.pull("piper-joe-medium", sha256="0" * 64)  # the catalog already names every digest
    with pytest.raises(UsageError, match="catalog model"):
        voxcli.pull(server.add("/x.onnx", b"x"), name="silero-vad")  # would shadow a catalog model
    with pytest.raises(UsageError, match="no such file"):
        voxcli.pull(str(tmp_path / "missing.tar.gz"))
    with pytest.raises(ModelNotFoundError, match="unknown model"):
        voxcli.pull("no-such-model")
    with pytest.raises(UsageError, match="64 hex"):
        voxcli.pull(server.url + "/x.onnx", sha256="nothex")
    assert server.log == []  # every one refused before any request


def test_model_lookups_create_no_derived_dir(server, voice_bytes, tmp_path, monkeypatch):
    """Finding a model used to mkdir derived/<name> each time; only a writer creates it now."""
    _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    voxcli.pull("test-voice")
    b = resolve_model("test-voice", kind="tts", offline=True)
    assert installed_bundle("piper-joe-medium") is not None  # a package model's lookup too
    assert runner.invoke(app, ["models", "--json"]).exit_code == 0
    assert b.derived_dir == _cache() / "derived" / "test-voice"
    assert not (_cache() / "derived").exists()
    assert Cache.default().derived_dir("test-voice", create=True).is_dir()


def test_pull_takes_offline_and_verbose_after_the_subcommand(server, voice_bytes, tmp_path, monkeypatch):
    _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    monkeypatch.setenv("VOXCLI_OFFLINE", "0")  # so the flag's os.environ write is undone after the test
    r = runner.invoke(app, ["pull", "test-voice", "--offline"])
    assert r.exit_code == ExitCode.USAGE and "cannot pull while offline" in r.stderr
    assert server.log == []
    monkeypatch.setenv("VOXCLI_OFFLINE", "0")
    from voxcli.cli.errors import STATE

    STATE.offline = False
    r = runner.invoke(app, ["pull", "test-voice", "--verbose", "--quiet"])
    assert r.exit_code == 0, r.output
    assert "GET " in r.stderr  # the download's log line, shown by --verbose


def test_name_sha256_and_kind_apply_to_exactly_one_url_or_path(tmp_path):
    r = runner.invoke(app, ["pull", "silero-vad", "--name", "x"])
    assert r.exit_code == ExitCode.USAGE and "exactly one URL or path" in r.stderr


def test_list_models_is_the_models_command_without_the_cli(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "model.gguf").write_bytes(b"GGUF")
    voxcli.pull(str(tmp_path / "d"), name="mine")
    rows = {r.name: r for r in list_models()}
    assert rows["mine"].kind == "llm" and rows["mine"].status == "installed" and rows["mine"].size == 4
    assert rows["piper-joe-medium"].status == "package"
    listing = json.loads(runner.invoke(app, ["models", "--json"]).stdout)
    assert {m["name"]: m["status"] for m in listing}["mine"] == "installed"
    assert {r.name for r in list_models(kind="llm")} == {r.name for r in rows.values() if r.kind == "llm"}

