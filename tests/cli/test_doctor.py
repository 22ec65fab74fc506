"""`voxcli doctor`: real checks on this machine, a corrupted cache model found and re-pulled.

The corrupted model is the real Silero VAD file served by a loopback HTTP
server under a test catalog entry, pulled into the per-test cache, then
edited in place (same size, so only the sha256 can tell).
"""
from __future__ import annotations

import hashlib
import json
import sys

import pytest
from typer.testing import CliRunner

from tests.hub.loopback import start
from voxcli.cli.app import app
from voxcli.doctor import CHECKS, check_portaudio, run_checks
from voxcli.hub.pull import pull
from voxcli.hub.resolve import installed_bundle

runner = CliRunner()
NAME = "doctor-vad"
FILE = "silero_vad.onnx"


def vox(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
def served_model(vad_bundle, tmp_path, monkeypatch):
    """A catalog model whose only source is a loopback URL serving the real VAD file."""
    data = vad_bundle.file(FILE).read_bytes()
    server = start()
    url = server.add(f"/m/{FILE}", data)
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(f"""
[models.{NAME}]
kind = "vad"
license = "MIT"
description = "doctor test model"
files = [{{ name = "{FILE}", size = {len(data)}, sha256 = "{hashlib.sha256(data).hexdigest()}" }}]

[[models.{NAME}.sources]]
type = "url"
url = "{url}"
members = {{ "{FILE}" = "" }}
""")
    monkeypatch.setenv("VOXCLI_CATALOG", str(catalog))
    pull(NAME)
    yield server, data
    server.server.shutdown()


def _corrupt_in_place(path) -> None:
    # Same size, different bytes: the registry's size check still finds the model.
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def test_edited_model_is_detected_and_fix_repairs_it(served_model):
    server, data = served_model
    f = installed_bundle(NAME).file(FILE)
    r = vox("doctor", "--only", "cache", "--json")
    assert r.exit_code == 0, r.output
    (cache,) = json_lines(r.stdout)
    assert cache["status"] in ("ok", "warn")  # warn: the other defaults are not in this per-test cache
    assert {m["name"]: m["ok"] for m in cache["details"]["models"]}[NAME] is True

    _corrupt_in_place(f)
    assert installed_bundle(NAME) is not None  # the registry alone would not notice
    r = vox("doctor", "--only", "cache", "--json")
    assert r.exit_code == 1
    (cache,) = json_lines(r.stdout)
    assert cache["status"] == "fail" and NAME in cache["summary"]
    bad = {m["name"]: m for m in cache["details"]["models"]}[NAME]
    assert not bad["ok"] and bad["fixable"] and "sha256" in bad["problems"][0]
    assert "voxcli doctor --fix" in cache["fix"]
    r = vox("doctor", "--only", "cache")  # the human view says the same on stderr
    assert r.exit_code == 1 and "FAIL cache" in r.stderr and "fix: run `voxcli doctor --fix`" in r.stderr
    assert r.stdout == ""

    gets_before = len(server.gets(f"/m/{FILE}"))
    r = vox("doctor", "--only", "cache", "--fix", "--json")
    assert r.exit_code == 0, r.output
    (cache,) = json_lines(r.stdout)
    assert cache["details"]["repaired"] == [NAME] and cache["status"] in ("ok", "warn")
    assert len(server.gets(f"/m/{FILE}")) == gets_before + 1
    assert installed_bundle(NAME).file(FILE).read_bytes() == data


def test_truncated_file_and_offline_fix(served_model, monkeypatch):
    _server, data = served_model
    f = installed_bundle(NAME).file(FILE)
    f.write_bytes(data[:1000])
    r = vox("--offline", "doctor", "--only", "cache", "--fix", "--json")
    assert r.exit_code == 1
    (cache,) = json_lines(r.stdout)
    bad = {m["name"]: m for m in cache["details"]["models"]}[NAME]
    assert "has 1000 bytes" in bad["problems"][0]
    assert cache["details"]["repaired"] == [] and "go online" in cache["fix"]


def test_json_shape_and_order_of_all_checks():
    r = vox("doctor", "--json")
    lines = json_lines(r.stdout)
    assert [x["name"] for x in lines] == list(CHECKS)
    for x in lines:
        assert set(x) == {"name", "status", "summary", "fix", "details", "seconds"}
        assert x["status"] in ("ok", "warn", "fail") and x["summary"]
        assert (x["fix"] is None) == (x["status"] == "ok")
    assert r.exit_code == (1 if any(x["status"] == "fail" for x in lines) else 0)
    by = {x["name"]: x for x in lines}
    # Real machine state: onnxruntime and espeak-ng are dependencies, so they must work here.
    assert by["onnxruntime"]["status"] == "ok" and "CPUExecutionProvider" in by["onnxruntime"]["details"]["providers"]
    assert by["espeak-ng"]["status"] == "ok" and by["espeak-ng"]["details"]["phonemes"].strip()
    assert by["disk"]["details"]["free_bytes"] > 0
    # The default voice ships in a package: it is hashed against the catalog even in an empty cache.
    assert {m["name"]: m["origin"] for m in by["cache"]["details"]["models"]}["piper-joe-medium"] == "package"


def test_missing_portaudio_is_reported_not_crashed(monkeypatch):
    # sys.modules[name] = None makes `import sounddevice` raise ImportError, as on a machine without it.
    monkeypatch.setitem(sys.modules, "sounddevice", None)
    r = check_portaudio()
    assert r.status == "fail" and "PortAudio cannot be loaded" in r.summary and "libportaudio2" in r.fix
    res = vox("doctor", "--only", "portaudio", "--only", "devices")
    assert res.exit_code == 1
    assert "FAIL portaudio" in res.stderr and "WARN devices" in res.stderr and "-o out.wav" in res.stderr
    assert "Traceback" not in res.output


def test_malformed_config_fails_the_config_check(isolated_env):
    (isolated_env / "config.toml").write_text("[tts]\nvoice = \n")
    (r,) = run_checks(["config"])
    assert r.status == "fail" and "line 2" in r.summary


def test_unknown_check_is_a_usage_error():
    r = vox("doctor", "--only", "teeth")
    assert r.exit_code == 2 and "unknown check 'teeth'" in r.stderr
