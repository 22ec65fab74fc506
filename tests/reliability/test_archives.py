"""Hostile archives: hardlinks and symlinks that escape, device files, decompression bombs.

(Path traversal, absolute paths, a tar symlink and a wheel whose index sha256
does not match are in tests/hub/test_pull.py.) Each archive is served by
the loopback server or given as a local path; the assertions are the exit
code, one error line, and that nothing was written anywhere.
"""
from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from voxcli.cli.app import app
from voxcli.errors import ExitCode, IntegrityError
from voxcli.hub.archive import extract_members, list_archive

runner = CliRunner()


def _cache() -> Path:
    return Path(os.environ["VOXCLI_CACHE_DIR"])


def _tar(add) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        ok = tarfile.TarInfo("voice/ok.txt")
        ok.size = 2
        t.addfile(ok, io.BytesIO(b"ok"))
        add(t)
    return buf.getvalue()


def _hardlink_out(t: tarfile.TarFile) -> None:
    info = tarfile.TarInfo("voice/shadow")
    info.type = tarfile.LNKTYPE
    info.linkname = "/etc/shadow"
    t.addfile(info)


def _hardlink_dotdot(t: tarfile.TarFile) -> None:
    info = tarfile.TarInfo("voice/up")
    info.type = tarfile.LNKTYPE
    info.linkname = "../../../outside"
    t.addfile(info)


def _symlink_dotdot(t: tarfile.TarFile) -> None:
    info = tarfile.TarInfo("voice/up")
    info.type = tarfile.SYMTYPE
    info.linkname = "../../.."
    t.addfile(info)
    f = tarfile.TarInfo("voice/up/escaped.txt")  # written through the link if links were followed
    f.size = 4
    t.addfile(f, io.BytesIO(b"evil"))


def _char_device(t: tarfile.TarFile) -> None:
    info = tarfile.TarInfo("voice/null")
    info.type = tarfile.CHRTYPE
    info.devmajor, info.devminor = 1, 3
    t.addfile(info)


def _block_device(t: tarfile.TarFile) -> None:
    info = tarfile.TarInfo("voice/sda")
    info.type = tarfile.BLKTYPE
    info.devmajor, info.devminor = 8, 0
    t.addfile(info)


def _fifo(t: tarfile.TarFile) -> None:
    info = tarfile.TarInfo("voice/pipe")
    info.type = tarfile.FIFOTYPE
    t.addfile(info)


def _zip_with_mode(mode: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("ok.txt", "ok")
        info = zipfile.ZipInfo("dev")
        info.external_attr = mode << 16
        z.writestr(info, "")
    return buf.getvalue()


CASES = {
    "tar-hardlink-absolute": lambda: _tar(_hardlink_out),
    "tar-hardlink-dotdot": lambda: _tar(_hardlink_dotdot),
    "tar-symlink-dir-then-file": lambda: _tar(_symlink_dotdot),
    "tar-char-device": lambda: _tar(_char_device),
    "tar-block-device": lambda: _tar(_block_device),
    "tar-fifo": lambda: _tar(_fifo),
    "zip-symlink": lambda: _zip_with_mode(stat.S_IFLNK | 0o777),
    "zip-char-device": lambda: _zip_with_mode(stat.S_IFCHR | 0o666),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_links_and_devices_are_refused_and_nothing_is_written(server, tmp_path, case):
    data = CASES[case]()
    ext = "zip" if case.startswith("zip") else "tar.gz"
    url = server.add(f"/{case}.{ext}", data)
    before = set(tmp_path.parent.iterdir())
    r = runner.invoke(app, ["pull", url, "--name", "evil"])
    assert r.exit_code == ExitCode.INTEGRITY, r.output
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("voxcli: error:")]
    assert "unsafe archive member" in line and "Traceback" not in r.output
    assert not (_cache() / "models" / "evil").exists()
    assert list((_cache() / "tmp").iterdir()) == []
    assert set(tmp_path.parent.iterdir()) == before  # nothing appeared next to the test dir either
    local = tmp_path / f"evil.{ext}"
    local.write_bytes(data)
    assert runner.invoke(app, ["pull", str(local), "--name", "evil2"]).exit_code == ExitCode.INTEGRITY


# ------------------------------------------------------------------ decompression bombs

def _tar_bomb(nbytes: int) -> bytes:
    """A gzip'd tar whose one member is `nbytes` of zeros (about 1000:1)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=9) as t:
        info = tarfile.TarInfo("voice/model.onnx")
        info.size = nbytes

        class Zeros:
            left = nbytes

            def read(self, n: int = -1) -> bytes:
                n = self.left if n < 0 else min(n, self.left)
                self.left -= n
                return bytes(n)

        t.addfile(info, Zeros())  # type: ignore[arg-type]
    return buf.getvalue()


def _zip_bomb(nbytes: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        with z.open("model.onnx", "w", force_zip64=True) as f:
            chunk = bytes(1 << 20)
            for _ in range(nbytes >> 20):
                f.write(chunk)
    return buf.getvalue()


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    # 64 MB of zeros each: small enough to build in a second, far over the 1 MB limits below
    return {"tar.gz": _tar_bomb(64 << 20), "zip": _zip_bomb(64 << 20)}


@pytest.mark.parametrize("ext", ["tar.gz", "zip"])
def test_adhoc_bomb_is_refused_over_the_configured_limit_before_writing(server, bombs, monkeypatch, ext):
    assert len(bombs[ext]) < 200_000  # what is downloaded is small ...
    url = server.add(f"/bomb.{ext}", bombs[ext])
    monkeypatch.setenv("VOXCLI_MAX_EXTRACT_BYTES", str(1 << 20))  # ... what it expands to is not
    t0 = time.monotonic()
    r = runner.invoke(app, ["pull", url, "--name", "bomb"])
    assert r.exit_code == ExitCode.INTEGRITY, r.output
    (line,) = [ln for ln in r.stderr.splitlines() if ln.startswith("voxcli: error:")]
    assert "decompression bomb" in line and "VOXCLI_MAX_EXTRACT_BYTES" in r.stderr
    assert not (_cache() / "models" / "bomb").exists() and list((_cache() / "tmp").iterdir()) == []
    assert time.monotonic() - t0 < 10  # refused from the headers, not after inflating 64 MB


def test_catalog_bomb_is_capped_at_the_catalog_size(server, bombs, tmp_path, monkeypatch):
    """A hub archive replaced by a bomb (its sha256 in the catalog would catch a swap; here the
    catalog has no archive digest): extraction stops at the model's catalog size."""
    url = server.add("/hub/voice.tar.gz", bombs["tar.gz"])
    (tmp_path / "catalog.toml").write_text(f"""
[models.hub-voice]
kind = "tts"
files = [ {{ name = "model.onnx", size = 1000, sha256 = "{'0' * 64}" }} ]
[[models.hub-voice.sources]]
type = "url"
url = "{url}"
members = {{ "model.onnx" = "voice/model.onnx" }}
""")
    monkeypatch.setenv("VOXCLI_CATALOG", str(tmp_path / "catalog.toml"))
    r = runner.invoke(app, ["pull", "hub-voice"])
    assert r.exit_code == ExitCode.INTEGRITY, r.output
    assert "expands to more than 1000 bytes" in r.stderr
    assert not (_cache() / "models" / "hub-voice").exists() and list((_cache() / "tmp").iterdir()) == []


def test_default_cap_is_generous_and_the_env_override_is_checked(monkeypatch):
    from voxcli import paths
    from voxcli.errors import UsageError

    assert paths.max_extract_bytes() == 20 << 30
    monkeypatch.setenv("VOXCLI_MAX_EXTRACT_BYTES", "lots")
    with pytest.raises(UsageError):
        paths.max_extract_bytes()


def test_a_member_header_that_lies_is_cut_at_the_limit(tmp_path):
    """Bytes are counted while copying too: the declared-size check is not the only guard."""
    data = b"x" * 5000
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("m.bin")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    arch = tmp_path / "a.tar"
    arch.write_bytes(buf.getvalue())
    assert list_archive(arch, 5000) == ["m.bin"]
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(IntegrityError, match="decompression bomb"):
        extract_members(arch, {"m.bin": "m.bin"}, out, max_bytes=4999)
    assert list(out.iterdir()) == []
    extract_members(arch, {"m.bin": "m.bin"}, out, max_bytes=5000)
    assert hashlib.sha256((out / "m.bin").read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("garbage", [b"", b"PK\x03\x04" + os.urandom(200), os.urandom(4096)],
                         ids=["empty", "zip-magic-then-noise", "noise"])
def test_garbage_archives_are_a_clear_integrity_error(server, garbage):
    url = server.add("/junk.tar.gz", garbage)
    r = runner.invoke(app, ["pull", url, "--name", "junk"])
    assert r.exit_code == ExitCode.INTEGRITY, r.output
    assert "not a readable archive" in r.stderr and "Traceback" not in r.output


def test_extraction_is_linear_in_the_number_of_members(tmp_path):
    """30k empty files (GNU tar: a fraction of a second). `TarFile.getmember` per member made this quadratic:
    about a minute here for 30k, and 100k did not finish; one pass in archive order takes seconds."""
    archive = tmp_path / "many.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        for i in range(30_000):
            info = tarfile.TarInfo(f"pack/f{i:06d}.txt")
            t.addfile(info, io.BytesIO(b""))
    out = tmp_path / "out"
    t0 = time.perf_counter()
    names = list_archive(archive)
    extract_members(archive, {n: n for n in names}, out)
    elapsed = time.perf_counter() - t0
    assert len(names) == 30_000 and sum(1 for _ in (out / "pack").iterdir()) == 30_000
    assert elapsed < 30, f"extracting 30k members took {elapsed:.1f} s"
