"""The incremental SSE parser: spec cases and independence from how the bytes are cut."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from voxcli.llm.sse import SSEParser


def parse_all(chunks: list[bytes]) -> list[tuple[str, str]]:
    p = SSEParser()
    out = []
    for c in chunks:
        out += [(e.event, e.data) for e in p.feed(c)]
    return out


def test_basic_events_comments_and_multiline_data():
    stream = b": keep-alive\n\ndata: one\n\nevent: x\ndata: a\ndata: b\n\ndata:no-space\n\n"
    assert parse_all([stream]) == [("message", "one"), ("x", "a\nb"), ("message", "no-space")]


def test_crlf_and_cr_line_endings_even_split_between_cr_and_lf():
    assert parse_all([b"data: a\r", b"\n\r", b"\ndata: b\r\r"]) == [("message", "a"), ("message", "b")]


def test_utf8_split_inside_a_character():
    data = "data: café ☕\n\n".encode()
    cut = data.index("☕".encode()) + 1
    assert parse_all([data[:cut], data[cut:]]) == [("message", "café ☕")]


def test_torn_last_event_is_not_delivered():
    p = SSEParser()
    assert [e.data for e in p.feed(b'data: {"a": 1}\n\ndata: {"b"')] == ['{"a": 1}']
    assert p.has_partial


def test_blank_lines_without_data_dispatch_nothing():
    assert parse_all([b"\n\n\nevent: ping\n\n"]) == []


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
                            max_size=30), min_size=1, max_size=8),
    newline=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=12),
)
def test_any_split_gives_the_same_events(events, newline, cuts):
    stream = b"".join(b"data: " + e.encode() + newline + newline for e in events)
    points = sorted({c % (len(stream) + 1) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0] + points, points + [len(stream)])]
    assert parse_all(chunks) == [("message", e) for e in events]
