"""LocalAgreement-n with scripted hypotheses: the ratchet never takes a stable word back."""
from __future__ import annotations

import pytest

from voxcli.asr.agreement import CLITIC_SKIPS, LocalAgreement, align_end, common_prefix, normalize_word


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


def test_finalize_commits_the_rest_in_the_final_decode_spelling() -> None:
    la, _ = run(["fail again fail", "fail again fail bet"])
    la.finalize("Fail again, fail better.".split())
    assert la.stable_text == "Fail again, fail better."  # same words: the final decode spells them
    assert la.volatile == []


def test_final_keeps_the_ratchet_for_n2_and_may_only_repunctuate() -> None:
    la, _ = run(["how many likes does", "how many likes does a"])
    assert la.stable_text == "how many likes does" and la.retractions == 0
    # The final decode disagrees with a shown word: what was shown stays, the rest is the final's.
    la.finalize("How many legs does a spider have?".split())
    assert la.stable_text == "how many likes does a spider have?"
    assert la.retractions == 0
    la.reset()
    la, _ = run(["ever tried, ever", "ever tried, ever failed"])
    la.finalize("Ever tried. Ever failed.".split())  # same words, the final's punctuation
    assert la.stable_text == "Ever tried. Ever failed." and la.retractions == 0


def test_final_decode_is_authoritative_for_n1_and_its_corrections_are_counted() -> None:
    la, _ = run(["how many likes does", "how many likes does a"], n=1)
    la.finalize("How many legs does a spider have?".split())
    assert la.stable_text == "How many legs does a spider have?"  # the final text, not the early guess
    assert la.retractions >= 1 and la.flicker_words >= 1  # "likes" taken back


def test_prompt_carries_no_punctuation() -> None:
    la, _ = run(["What is the capital? A", "What is the capital? Of"])
    assert la.stable_text == "What is the capital?"
    assert la.prompt == "What is the capital"
    assert LocalAgreement(1).prompt == ""


def test_n1_shows_every_hypothesis_and_counts_what_it_takes_back() -> None:
    la, seen = run(["i'd like to", "i'd like to prove", "i'd like to move my", "i'd like to move my flight."], n=1)
    assert [s for s, _ in seen] == ["i'd like to", "i'd like to prove", "i'd like to move my", "i'd like to move my flight"]
    assert la.retractions == 1 and la.flicker_words == 1  # "prove" was shown, then taken back
    la.finalize("I'd like to move my flight.".split())
    assert la.stable_text == "I'd like to move my flight." and la.retractions == 1
    la.reset()
    assert la.retractions == 1  # counters are per stream, not per utterance


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
    assert align_end(["a", "b"], ["a", "b", "c"]) == (2, 2, True)
    assert align_end(["a", "x"], ["a", "y", "c"]) == (2, 2, False)  # trailing substitution paired: no anchor
    assert align_end([], ["a"]) == (0, 0, False)
    # The anchor: two words in a row that match, ending at most four words before the stable words end.
    assert align_end("a b c d e f".split(), "a b x y z w v".split()).anchored
    assert not align_end("a b c d e f g".split(), "a b x y z w v".split()).anchored
    with pytest.raises(ValueError):
        LocalAgreement(0)


def test_a_final_written_differently_does_not_line_up_and_one_that_extends_or_realigns_does() -> None:
    la, _ = run(["1, 2, 3, 4, 5 6", "1, 2, 3, 4, 5 6 7 8"])
    assert la.stable_text == "1, 2, 3, 4, 5 6"
    # Whisper's unforced final of the same audio: one hyphenated word. Paired word by word it would
    # swallow "7 8 9 10"; the streamer must decode again, forced with the shown words.
    assert not la.lines_up(["1-2-3-4-5-6-7-8-9-10."])
    assert la.lines_up("1, 2, 3, 4, 5, 6, 7, 8, 9, 10.".split())  # extends (punctuation aside)
    la2, _ = run(["how many likes does", "how many likes does a"])
    assert la2.lines_up("How many legs does a spider have?".split())  # "does a" realigns: shown word stays
    assert LocalAgreement(1).lines_up(["anything"]) and LocalAgreement(2).lines_up(["nothing", "shown"])


def test_a_final_that_says_the_stable_words_again_later_does_not_line_up_there() -> None:
    """A replayed barge-in: "It was" shown, the unforced final heard the start otherwise and said "it was" again
    seven words in; placed there, "the best of times" was lost. The streamer decodes again, forced."""
    la = LocalAgreement(2)
    la.update("It was just the best".split())
    la.update("It was as best of times".split())
    assert la.stable_text == "It was"
    final = "The words of the best of times, it was the worst of times.".split()
    assert not align_end(la.stable, final).anchored and not la.lines_up(final)
    assert la.lines_up("It was the best of times, it was the worst of times.".split())  # extends
    assert la.lines_up("And it was the best of times, it was the worst of times.".split())  # one word before


def test_a_hypothesis_that_goes_on_inside_the_last_stable_word_commits_nothing() -> None:
    la, _ = run(["We work.", "We are all going to act."])
    assert la.stable == ["We"]
    # Forced with "We", Whisper wrote "We're" (two_cities, "we were"): paired word by word the suffix
    # was lost and "all going ..." committed after "We", which the final "We were ..." cannot extend.
    for _ in range(2):
        assert la.update("We're all going direct to Heaven.".split()) == []
    assert la.stable == ["We"] and la.volatile_text == "all going direct to Heaven."
    la.finalize("We were all going direct to heaven.".split())
    assert la.stable_text == "We were all going direct to heaven." and la.retractions == 0


def test_a_model_that_keeps_the_clitic_cannot_stall_the_captions() -> None:
    la, _ = run(["We work.", "We are all going to act."])
    assert la.stable == ["We"]
    keeps = "We're all going direct to Heaven.".split()
    assert [la.update(keeps) for _ in range(CLITIC_SKIPS)] == [[]] * CLITIC_SKIPS  # skipped: nothing commits
    la.update(keeps)  # skipped too often in a row: this one counts as usual (n = 2 needs one more)
    assert la.update(keeps) == ["all", "going", "direct", "to", "Heaven"]
    assert la.stable_text == "We all going direct to Heaven"

    la, _ = run(["We work.", "We are all going to act."])
    assert la.update(keeps) == [] and la.update("We all".split()) == []  # the run of skips is broken...
    assert [la.update(keeps) for _ in range(CLITIC_SKIPS)] == [[]] * CLITIC_SKIPS  # ...so it counts again
    assert la.stable == ["We"]


def test_a_shown_hypothesis_commits_nothing_and_does_not_count_toward_an_agreement() -> None:
    """`show` (a patched utterance's short decodes): volatile only; the next two decodes must agree by themselves."""
    la = LocalAgreement(2)
    la.show("It was a".split())
    la.show("It was a best of".split())
    assert la.stable == [] and la.volatile_text == "It was a best of"
    la.update("It was the best of times".split())  # with the shown ones, "It was" (or "It was a") would commit
    assert la.stable == [] and la.volatile_text == "It was the best of times"
    la.update("It was the best of times, it".split())
    assert la.stable_text == "It was the best of times," and la.volatile_text == "it"
    la.show("It was the best of times, it was".split())  # after stable words: aligned to them, still nothing new
    assert la.stable_text == "It was the best of times," and la.volatile_text == "it was"
