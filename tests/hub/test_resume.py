"""A resumed download never splices two versions of a file (issue 18, item 5).

The server (tests/hub/loopback.py, a real socket) cuts the connection in the
middle of the real voice graph and, right then, the file on the server
changes. Without --sha256 nothing but the server's version validators can
tell the two halves apart, so the installed file must be entirely the new
version (or entirely the old), never old[:cut] + new[cut:].
"""
from __future__ import annotations

import pytest

import voxcli
from tests.hub.test_pull import ONNX, read_voice
from voxcli.errors import FetchError
from voxcli.hub.resolve import installed_bundle

voice_bytes = pytest.fixture(scope="module")(read_voice)


def _versions(voice_bytes) -> tuple[bytes, bytes]:
    """The real graph, and a re-export of it that differs near both ends (so a splice differs from both)."""
    old = voice_bytes[ONNX]
    new = bytearray(old)
    for i in (1000, len(old) - 1000):
        new[i] ^= 0xFF
    return old, bytes(new)


def _installed(name: str) -> bytes:
    b = installed_bundle(name)
    assert b is not None
    return b.file(ONNX).read_bytes()


def _assert_one_version(got: bytes, old: bytes, new: bytes) -> None:
    assert len(got) == len(old)
    assert got in (old, new), "the installed file is a splice of two versions"


@pytest.mark.parametrize("validator", ["etag", "last-modified"])
@pytest.mark.parametrize("honour_if_range", [True, False])
def test_file_changed_between_cut_and_resume_installs_one_version(server, voice_bytes, validator, honour_if_range):
    old, new = _versions(voice_bytes)
    url = server.add(f"/v/{validator}/{ONNX}", old, drop_at=len(old) // 2, replace_after_drop=new,
                     validator=validator, honour_if_range=honour_if_range)
    voxcli.pull(url, name="v")
    got = _installed("v")
    _assert_one_version(got, old, new)
    assert got == new  # the resume noticed the new version and fetched it whole
    assert server.if_ranges[1] is not None, "the resume was not pinned with If-Range"


def test_without_validator_or_hash_a_resume_starts_over(server, voice_bytes):
    """Nothing pins the partial file to a version, so it is not resumed: the second GET has no Range."""
    old, new = _versions(voice_bytes)
    path = f"/v/none/{ONNX}"
    url = server.add(path, old, drop_at=len(old) // 2, replace_after_drop=new, validator=None)
    voxcli.pull(url, name="v")
    assert _installed("v") == new
    assert [g[2] for g in server.gets(path)] == [None, None]


def test_a_206_that_starts_elsewhere_is_not_appended(server, voice_bytes):
    """A server whose Content-Range does not start where we asked: restart from zero, never append."""
    data = voice_bytes[ONNX]
    path = f"/v/offset/{ONNX}"
    url = server.add(path, data, drop_at=len(data) // 2, range_offset=-4096)
    voxcli.pull(url, name="v")
    assert _installed("v") == data
    ranges = [g[2] for g in server.gets(path)]
    assert ranges == [None, f"bytes={len(data) // 2}-", None]


def test_partial_from_an_earlier_run_is_not_resumed_into_a_new_version(server, voice_bytes):
    """A pull that gave up (the part file and its ETag stay), then the file changes, then the pull again."""
    old, new = _versions(voice_bytes)
    path = f"/v/later/{ONNX}"
    url = server.add(path, old, drop_after=len(old) // 8)
    with pytest.raises(FetchError):
        voxcli.pull(url, name="v")
    blob = server.blobs[path]
    blob.data, blob.drop_after = new, None
    voxcli.pull(url, name="v")
    assert _installed("v") == new
    last = server.gets(path)[-1]
    assert last[2] is not None and server.if_ranges[-1] is not None  # it tried to resume, pinned, and got 200


def test_unchanged_file_still_resumes_where_it_stopped(server, voice_bytes):
    data = voice_bytes[ONNX]
    path = f"/v/same/{ONNX}"
    url = server.add(path, data, drop_at=len(data) // 3)
    voxcli.pull(url, name="v")
    assert _installed("v") == data
    assert [g[2] for g in server.gets(path)] == [None, f"bytes={len(data) // 3}-"]


@pytest.mark.parametrize("honour_if_range", [True, False])
def test_partial_longer_than_the_new_version_is_not_taken_for_complete(server, voice_bytes, honour_if_range):
    """The file shrank on the server: a Range past its end gets 416, which must not mean "already complete"."""
    old = voice_bytes[ONNX]
    new = bytes(b ^ 0xFF for b in old[:4096]) + old[4096: len(old) // 2]
    path = f"/v/shrank/{ONNX}"
    url = server.add(path, old, drop_after=len(old) // 5, honour_if_range=honour_if_range)
    with pytest.raises(FetchError):
        voxcli.pull(url, name="v")  # 4 tries of a fifth each: 80 % of the old version is kept
    blob = server.blobs[path]
    blob.data, blob.drop_after = new, None
    voxcli.pull(url, name="v")
    assert _installed("v") == new
