"""Cache corner cases of issue 18 (item 8), and derived files that are verified (item 4, hub side).

Real loopback servers (tests/hub/loopback.py), real archives and real
`python -m voxcli pull` processes killed with -9; the bytes are the real
default voice's.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.hub.test_pull import CONFIG, ONNX, _catalog, _sha, _targz, read_voice
from voxcli.cli.app import app
from voxcli.errors import ExitCode
from voxcli.hub import leftovers
from voxcli.hub.cache import Cache
from voxcli.hub.resolve import installed_bundle

runner = CliRunner()
voice_bytes = pytest.fixture(scope="module")(read_voice)


def _cache() -> Cache:
    return Cache(Path(os.environ["VOXCLI_CACHE_DIR"]))


def _doctor_cache(*args: str) -> tuple[int, dict]:
    r = runner.invoke(app, ["doctor", "--only", "cache", "--json", *args])
    (line,) = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    return r.exit_code, line


# ------------------------------------------------------------------ an archive with a manifest.json

def test_an_archive_holding_manifest_json_is_refused_and_nothing_is_installed(voice_bytes, tmp_path):
    archive = tmp_path / "mine.tar.gz"
    archive.write_bytes(_targz({f"v/{CONFIG}": voice_bytes[CONFIG], "v/manifest.json": b'{"voice": "mine"}'}))
    r = runner.invoke(app, ["pull", str(archive)])
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "manifest.json" in r.stderr and "Traceback" not in r.output
    assert not (_cache().models / "mine").exists()
    listed = json.loads(runner.invoke(app, ["models", "--json"]).stdout)
    assert all(m["name"] != "mine" for m in listed)
    assert not list((_cache().root / "tmp").glob("mine.*"))  # no staging folder either


# ------------------------------------------------------------------ a bad source, then a good one

@pytest.mark.parametrize("fault", ["redirect-loop", "bad-gzip"])
def test_a_redirect_loop_or_undecodable_source_falls_through_to_the_next(server, voice_bytes, tmp_path, monkeypatch,
                                                                         fault):
    data = voice_bytes[CONFIG]
    bad = {"redirect-loop": dict(redirect_to="/bad/c.json"), "bad-gzip": dict(content_encoding="gzip")}[fault]
    bad_url = server.add("/bad/c.json", data, **bad)
    good_url = server.add("/good/c.json", data)
    sources = "".join(f"""
[[models.two-sources.sources]]
type = "url"
url = "{u}"
members = {{ "{CONFIG}" = "" }}
""" for u in (bad_url, good_url))
    _catalog(tmp_path, monkeypatch, f"""
[models.two-sources]
kind = "data"
license = "MIT"
description = "a config served by a broken and a working source"
files = [{{ name = "{CONFIG}", size = {len(data)}, sha256 = "{_sha(data)}" }}]
{sources}""")
    r = runner.invoke(app, ["pull", "two-sources"])
    assert r.exit_code == 0, r.output
    assert installed_bundle("two-sources").file(CONFIG).read_bytes() == data
    assert server.gets("/good/c.json")


# ------------------------------------------------------------------ the same URL twice

def test_pulling_the_same_url_twice_is_already_installed(server, voice_bytes):
    url = server.add(f"/v/{CONFIG}", voice_bytes[CONFIG])
    assert runner.invoke(app, ["pull", url, "--name", "cfg"]).exit_code == 0
    r = runner.invoke(app, ["pull", url, "--name", "cfg"])
    assert r.exit_code == 0 and "already installed" in r.stderr, r.output
    assert len(server.gets(f"/v/{CONFIG}")) == 1
    assert leftovers.find() == []  # a finished pull leaves nothing `doctor` would call a leftover
    r = runner.invoke(app, ["pull", url, "--name", "cfg", "--sha256", "0" * 64])  # another version asked for
    assert r.exit_code != 0 and "already installed from another source" in r.stderr
    r = runner.invoke(app, ["pull", url, "--name", "cfg", "--force"])
    assert r.exit_code == 0 and len(server.gets(f"/v/{CONFIG}")) == 2


# ------------------------------------------------------------------ leftovers of kill -9

def _slow_pull(url: str, name: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "voxcli", "pull", url, "--name", name, "--json"],
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_download(proc: subprocess.Popen, at_least: int) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    for line in proc.stdout:
        ev = json.loads(line)
        if ev.get("phase") == "download" and ev.get("done", 0) >= at_least:
            return
        assert time.monotonic() < deadline, "the download never started"
    raise AssertionError(f"pull ended early: {proc.wait()} {proc.stderr.read() if proc.stderr else ''}")


def test_leftovers_of_a_killed_pull_are_shown_and_removed_but_a_live_pull_is_left_alone(server, voice_bytes):
    data = voice_bytes[ONNX]
    dead_url = server.add(f"/dead/{ONNX}", data, delay_per_chunk=0.02)
    live_url = server.add(f"/live/{ONNX}", data, delay_per_chunk=0.02)
    dead = _slow_pull(dead_url, "dead")
    _wait_download(dead, 1 << 20)
    dead.send_signal(signal.SIGKILL)
    dead.wait(10)
    live = _slow_pull(live_url, "live")
    try:
        _wait_download(live, 1 << 20)
        cache = _cache()
        assert len(list(cache.downloads().glob("*.part"))) == 2
        code, check = _doctor_cache()
        shown = {Path(x["path"]).name.split(".")[0]: x for x in check["details"]["leftovers"]}
        assert check["status"] == "warn" and "voxcli rm --partials" in check["fix"], check
        assert "dead" in shown and "live" not in shown  # the live pull's staging folder is held
        assert sum(x["kind"] == "partial download" for x in check["details"]["leftovers"]) == 1  # only the dead one

        r = runner.invoke(app, ["rm", "--partials"])
        assert r.exit_code == 0 and "removed 3 partial download(s) and staging folder(s)" in r.stderr, r.output
        parts = list(cache.downloads().glob("*.part"))
        assert len(parts) == 1 and parts[0].stat().st_size > 0  # the live one: still there, still growing
        assert sorted(p.name.split(".")[0] for p in (cache.root / "tmp").iterdir()) == ["blobs", "live"]
    finally:
        live.send_signal(signal.SIGKILL)
        live.wait(10)
    assert runner.invoke(app, ["rm", "--partials"]).exit_code == 0  # now it is dead too
    assert list(cache.downloads().iterdir()) == [] and list((cache.root / "tmp").iterdir()) == []
    r = runner.invoke(app, ["rm", "--partials"])
    assert r.exit_code == 0 and "no leftovers" in r.stderr


def test_rm_needs_a_name_or_partials():
    r = runner.invoke(app, ["rm"])
    assert r.exit_code == ExitCode.USAGE and "--partials" in r.stderr


# ------------------------------------------------------------------ derived files are verified

def _derived(voice_bytes) -> tuple[Cache, list[Path]]:
    cache = _cache()
    d = cache.derived_dir("some-voice", create=True)
    files = [d / "decoder.onnx", d / "front" / "front.onnx"]
    files[1].parent.mkdir()
    files[0].write_bytes(voice_bytes[ONNX][: 1 << 20])
    files[1].write_bytes(voice_bytes[ONNX][1 << 20: 2 << 20])
    return cache, files


def _flip(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def test_record_and_check_derived(voice_bytes):
    cache, files = _derived(voice_bytes)
    (unrecorded,) = cache.check_derived("some-voice", files[:1])
    assert unrecorded.startswith("decoder.onnx has no recorded hash")
    cache.record_derived("some-voice", files)
    assert cache.check_derived("some-voice", files) == []
    assert Cache.of_derived(files[0].parent) == (cache, "some-voice")
    _flip(files[0])
    (problem,) = cache.check_derived("some-voice", files)
    assert problem.startswith("sha256 mismatch for decoder.onnx")
    files[1].unlink()
    assert cache.check_derived("some-voice", files[1:]) == ["front/front.onnx is missing"]
    cache.record_derived("some-voice", files[:1])  # rebuilt: recorded again, the vanished one forgotten
    assert cache.check_derived("some-voice", files[:1]) == []
    assert set(json.loads((files[0].parent / "derived.json").read_text())["files"]) == {"decoder.onnx"}


def test_doctor_reports_a_flipped_derived_byte_and_fix_removes_it(voice_bytes):
    cache, files = _derived(voice_bytes)
    cache.record_derived("some-voice", files)
    code, check = _doctor_cache()
    assert check["details"]["derived_problems"] == {}
    _flip(files[1])
    code, check = _doctor_cache()
    assert code == 1 and check["status"] == "fail", check
    assert "derived files of some-voice" in check["summary"] and "front/front.onnx" in check["summary"]
    assert "voxcli doctor --fix" in check["fix"]
    code, check = _doctor_cache("--fix")
    assert check["details"]["derived_problems"] == {} and "removed bad derived files of some-voice" in check["summary"]
    assert not cache.derived_dir("some-voice").exists()  # rebuilt by its builder on next use


def test_a_file_changed_while_it_is_hashed_is_recorded_without_a_stamp(voice_bytes, monkeypatch):
    """The digest is of the bytes before the change: a stamp taken after it would vouch for bytes never hashed."""
    from voxcli.hub import cache as cache_mod
    from voxcli.hub import verify

    monkeypatch.setattr(cache_mod, "RACY_WINDOW_S", 0.0)  # only the change can deny the stamp
    cache, files = _derived(voice_bytes)
    real = verify.sha256_file

    def hash_then_write(path, *args, **kwargs):
        digest = real(path, *args, **kwargs)
        if Path(path) == files[0]:
            _flip(files[0])  # a writer got in while it was hashed (same size, distinct mtime)
        return digest

    monkeypatch.setattr(verify, "sha256_file", hash_then_write)
    cache.record_derived("some-voice", files)
    monkeypatch.setattr(verify, "sha256_file", real)
    recs = json.loads((files[0].parent / "derived.json").read_text())["files"]
    assert "stamp" not in recs["decoder.onnx"] and "stamp" in recs["front/front.onnx"]
    monkeypatch.setattr(cache_mod, "_verified", set())  # a new process
    (problem,) = cache.check_derived("some-voice", files)
    assert problem.startswith("sha256 mismatch for decoder.onnx"), "hashed, so the change is found"


@pytest.mark.parametrize("record", [5, "x", None, [1, 2], {"sha256": 5}, {"size": 3}])
def test_a_record_that_is_not_a_record_is_unrecorded_not_a_crash(voice_bytes, record):
    cache, files = _derived(voice_bytes)
    cache.record_derived("some-voice", files)
    manifest = files[0].parent / "derived.json"
    data = json.loads(manifest.read_text())
    data["files"]["decoder.onnx"] = record
    manifest.write_text(json.dumps(data))
    (problem,) = cache.check_derived("some-voice", files)
    assert problem.startswith("decoder.onnx has no recorded hash")
