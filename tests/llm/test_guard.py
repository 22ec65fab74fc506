"""The bounds on one streamed answer (voxcli.llm.guard) and the key redaction (voxcli.llm.secret), as units.

The loopback-server tests in tests/reliability/test_llm_faults.py and
tests/reliability/test_secrets.py show the same behaviour through real sockets;
these pin the edge cases (every split of a key, budgets at the boundary).
"""
from __future__ import annotations

import threading
import time

import pytest

from voxcli.llm.guard import CHARS_PER_TOKEN, MAX_DELTA_CHARS, ProgressWatch, ReplyBudget, clip
from voxcli.llm.secret import MASK, StreamRedactor, redact

KEY = "sk-proj-4f9a-SECRET-d00d"


def _through(pieces: list[str], secret: str | None = KEY) -> str:
    r = StreamRedactor(secret)
    return "".join(r.feed(p) for p in pieces) + r.flush()


def test_redact_masks_every_occurrence_and_leaves_other_text():
    assert redact(f"a {KEY} b {KEY}", KEY) == f"a {MASK} b {MASK}"
    assert redact("nothing here", KEY) == "nothing here"
    assert redact(f"a {KEY}", None) == f"a {KEY}"


@pytest.mark.parametrize("cut", range(1, len(KEY) + 8))
def test_a_key_split_across_two_deltas_at_any_point_is_masked(cut):
    text = f"echo: Bearer {KEY} end"
    at = len("echo: Bearer ") + cut - 4
    out = _through([text[:at], text[at:]])
    assert out == f"echo: Bearer {MASK} end"


def test_a_key_one_character_per_delta_is_masked():
    text = f"header {KEY}, twice {KEY}."
    assert _through(list(text)) == f"header {MASK}, twice {MASK}."


def test_text_that_only_looks_like_the_start_of_a_key_is_released_unchanged():
    pieces = ["ask ", "s", "k-", "proj is not the key", " sk"]
    assert _through(pieces) == "".join(pieces)
    r = StreamRedactor(KEY)
    assert r.feed("ask me") == "ask me"  # no hold-back when the end cannot start the key


def test_a_long_key_prefix_at_the_end_of_the_stream_is_masked():
    assert _through(["proxy cut: ", KEY[:12]]) == f"proxy cut: {MASK}"
    assert _through(["ends with s", "k-"]) == "ends with sk-"  # short tails are ordinary text


def test_without_a_key_nothing_is_held_back():
    r = StreamRedactor(None)
    assert r.feed("sk-") == "sk-" and r.flush() == ""


def test_budget_counts_characters_not_deltas():
    b = ReplyBudget(max_tokens=10)
    out = b.take("x" * 1000)  # one delta: 250 tokens' worth of characters
    assert len(out) <= 10 * CHARS_PER_TOKEN and b.stop == "length"


def test_budget_counts_at_least_one_token_per_delta():
    b = ReplyBudget(max_tokens=3)
    assert [b.take("a"), b.take("b"), b.take("c")] == ["a", "b", "c"] and b.stop == "length"


def test_budget_finishes_the_word_it_stops_in():
    b = ReplyBudget(max_tokens=3)
    text = "".join(b.take(t) for t in ["one", " two", " three", " four"] if not b.stop)
    assert text == "one two three" and b.stop == "length"


def test_a_delta_over_the_cap_is_cut_and_ends_the_answer():
    b = ReplyBudget(max_tokens=100_000)
    out = b.take("word " * 100_000)
    assert len(out) <= MAX_DELTA_CHARS and b.stop == "oversized"


def test_a_server_count_can_only_tighten_the_budget():
    b = ReplyBudget(max_tokens=10)
    b.reported = 10
    assert b.tokens == 10
    b.reported = 0
    b.take("abcd")
    assert b.tokens == 1


def test_clip_cuts_at_the_limit_or_at_the_nearby_word_end():
    assert clip("short", 10) == "short"
    assert clip("hello world again", 7) == "hello world"
    assert clip("x" * 200, 10) == "x" * 10


def test_progress_watch_fires_once_after_the_timeout_without_progress():
    fired = threading.Event()
    w = ProgressWatch(0.3, fired.set)
    t0 = time.monotonic()
    w.start()
    assert fired.wait(3.0) and w.stalled
    assert 0.25 < time.monotonic() - t0 < 2.0
    w.stop()


def test_progress_watch_does_not_fire_while_progress_continues_or_after_stop():
    fired = threading.Event()
    w = ProgressWatch(0.3, fired.set)
    w.start()
    for _ in range(8):
        time.sleep(0.1)
        w.progress()
    assert not fired.is_set()
    w.stop()
    time.sleep(0.5)
    assert not fired.is_set() and not w.stalled


def test_progress_watch_rejects_a_non_positive_timeout():
    with pytest.raises(ValueError):
        ProgressWatch(0, lambda: None)
