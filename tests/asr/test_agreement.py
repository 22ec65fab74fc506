"""LocalAgreement-n with scripted hypotheses: the ratchet never takes a stable word back."""
from __future__ import annotations

import pytest

from voxcli.asr.agreement import LocalAgreement, align_end, common_prefix, normalize_word


def run(hyps: list[str], n: int = 2) -> tuple[LocalAgreement, list[tuple[str, str]]]:
    la = LocalAgreement(n)
    seen = []
    for h in hyps:
        la.update(h.split())
        seen.append((la.stable_text, la.volatile_text))
    return la, seen


def assert_monotonic(seen: list[tuple[str, str]]) -> None:
    for (a, _), (b, _) in zip(seen, seen[1:]):
        assert b.startswith(a), (a, b)


def test_design_example_prove_then_move() -> None:
    la, seen = run(["i'd like to prove", "i'd like to move my"])
    assert seen[0] == ("", "i'd like to prove")  # one hypothesis: nothing agreed yet
    assert la.stable == ["i'd", "like", "to"]
    assert la.volatile == ["move", "my"]
    la.update("i'd like to move my car".split())
    assert la.stable_text == "i'd like to move my" and la.volatile_text == "car"


def test_case_and_punctuation_do_not_block_agreement() -> None:
    la, seen = run(["Ever tried,", "ever tried. Ever", "Ever tried. Ever failed."])
    assert [normalize_word(w) for w in la.stable] == ["ever", "tried", "ever"]
    assert la.volatile_text == "failed."
    assert_monotonic(seen)


def test_shorter_hypothesis_never_retracts() -> None:
    la, seen = run(["the quick brown fox", "the quick brown fox jumps", "the quick", "the"])
    assert la.stable_text == "the quick brown fox"
    assert la.volatile == []
    assert_monotonic(seen)


def test_disagreement_after_commit_keeps_stable_and_realigns() -> None:
    la, seen = run(["we were all going", "we were all going direct", "we all going direct to heaven",
                    "we all going direct to heaven now"])
    assert la.stable_text.startswith("we were all going")
    assert la.stable_text.endswith("direct to heaven")  # the new words agreed after the realignment
    assert la.volatile_text == "now"
    assert_monotonic(seen)


def test_word_ending_the_buffer_is_committed_without_its_period() -> None:
    la, _ = run(["it was the age of.", "it was the age of."])
    assert la.stable_text == "it was the age of"  # the '.' marked the end of the audio, not of the sentence
    la.update("it was the age of foolishness.".split())
    assert la.volatile_text == "foolishness."


def test_n3_needs_three_agreeing_hypotheses() -> None:
    la, seen = run(["a b c", "a b d", "a b d e"], n=3)
    assert seen[1][0] == ""
    assert la.stable_text == "a b"


def test_finalize_commits_the_rest_and_keeps_the_stable_prefix() -> None:
    la, _ = run(["fail again fail", "fail again fail bet"])
    la.finalize("Fail again, fail better.".split())
    assert la.stable_text == "fail again fail better."
    assert la.volatile == []


def test_cut_moves_segment_words_to_frozen() -> None:
    la, _ = run(["one two three four", "one two three four five"])
    assert la.stable_text == "one two three four"
    new = la.cut("one two".split())  # the buffer head up to 'two' was cut off
    assert new == [] and la.frozen == 2
    la.update("three four five six".split())
    la.update("three four five six seven".split())
    assert la.stable_text == "one two three four five six"
    new = la.cut("five six seven eight".split())  # the segment holds words not yet stable
    assert new == ["seven", "eight"] and la.frozen == len(la.stable)


def test_helpers() -> None:
    assert normalize_word("I'd,") == "i'd" and normalize_word("\u201cHello!\u201d") == "hello"
    assert normalize_word("don\u2019t") == "don't"
    assert common_prefix([["A", "b."], ["a", "B", "c"]]) == 2
    assert align_end(["a", "b"], ["a", "b", "c"]) == (2, 2)
    assert align_end(["a", "x"], ["a", "y", "c"]) == (2, 2)  # trailing substitution paired
    assert align_end([], ["a"]) == (0, 0)
    with pytest.raises(ValueError):
        LocalAgreement(0)
