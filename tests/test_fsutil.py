"""fsutil: the one atomic writer (and the append-only log helpers)."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from voxcli.fsutil import AtomicTarget, append_line, atomic_path, atomic_write, read_records


def _umask(mask: int):
    class _Ctx:
        def __enter__(self):
            self.old = os.umask(mask)

        def __exit__(self, *exc):
            os.umask(self.old)

    return _Ctx()


def test_atomic_write_replaces_content_and_leaves_no_temp(tmp_path):
    p = tmp_path / "a.json"
    atomic_write(p, "old")
    atomic_write(p, "névé")  # str is written as UTF-8
    assert p.read_bytes() == "névé".encode("utf-8")
    atomic_write(p, b"\x00\x01")
    assert p.read_bytes() == b"\x00\x01"
    assert [q.name for q in tmp_path.iterdir()] == ["a.json"]


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_files_follow_the_umask_not_mkstemps_0600(tmp_path, mask, mode):
    p = tmp_path / "f"
    with _umask(mask):
        atomic_write(p, "x")
    assert stat.S_IMODE(p.stat().st_mode) == mode


def test_an_exception_keeps_the_old_file_and_removes_the_temp(tmp_path):
    p = tmp_path / "cfg.toml"
    p.write_text("old")
    seen: list[Path] = []
    with pytest.raises(RuntimeError):
        with atomic_path(p) as tmp:
            seen.append(tmp)
            tmp.write_text("half")
            raise RuntimeError("boom")
    assert p.read_text() == "old"
    assert not seen[0].exists() and [q.name for q in tmp_path.iterdir()] == ["cfg.toml"]


def test_the_temp_is_a_sibling_so_the_rename_is_atomic(tmp_path):
    with atomic_path(tmp_path / "out.wav") as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".out.wav.")
        tmp.write_bytes(b"RIFF")
    assert (tmp_path / "out.wav").read_bytes() == b"RIFF"


def test_durable_fsyncs_the_file_and_the_directory(tmp_path, monkeypatch):
    # A power cut cannot be staged here; record the fsyncs that protect against it instead.
    synced: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    atomic_write(tmp_path / "d", "x")
    assert len(synced) == 2 and synced[1] == str(tmp_path)
    synced.clear()
    atomic_write(tmp_path / "n", "x", durable=False)
    assert synced == []


def test_concurrent_writers_never_mix_content(tmp_path):
    p = tmp_path / "manifest.json"
    payloads = [bytes([65 + i]) * 200_000 for i in range(8)]
    errors: list[BaseException] = []

    def write(b: bytes) -> None:
        try:
            for _ in range(5):
                atomic_write(p, b, durable=False)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(b,)) for b in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert p.read_bytes() in payloads
    assert [q.name for q in tmp_path.iterdir()] == ["manifest.json"]


def test_a_killed_writer_leaves_the_old_file(tmp_path):
    p = tmp_path / "cfg"
    p.write_text("old")
    code = (
        "import os, sys\n"
        "from voxcli.fsutil import atomic_path\n"
        "with atomic_path(sys.argv[1]) as tmp:\n"
        "    tmp.write_text('half')\n"
        "    os._exit(9)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(p)], timeout=60)
    assert r.returncode == 9
    assert p.read_text() == "old"


def test_atomic_target_commit_and_discard_are_idempotent(tmp_path):
    t = AtomicTarget(tmp_path / "x")
    t.tmp.write_text("1")
    assert t.commit() == tmp_path / "x"
    assert t.commit() == tmp_path / "x"
    t.discard()
    assert (tmp_path / "x").read_text() == "1"
    u = AtomicTarget(tmp_path / "y")
    u.discard()
    u.discard()
    assert sorted(q.name for q in tmp_path.iterdir()) == ["x"]


def test_append_line_and_read_records_skip_torn_lines(tmp_path):
    log = tmp_path / "sub" / "log.jsonl"
    append_line(log, '{"a": 1}')
    append_line(log, '{"a": 2}\n')
    with open(log, "a") as f:
        f.write('{"a": 3')  # torn last line from a crash
    assert read_records(log, lambda o: "a" in o) == [{"a": 1}, {"a": 2}]
    assert read_records(log, lambda o: True, last=1) == [{"a": 2}]
    assert read_records(tmp_path / "missing", lambda o: True) == []
