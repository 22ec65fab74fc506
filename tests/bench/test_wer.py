from voxcli.bench.wer import normalize_text, number_words, word_errors


def test_normalization_ignores_case_punctuation_and_number_spelling() -> None:
    assert normalize_text("It's 42, the 3rd -- well-known!") == ["it's", "forty", "two", "the", "third", "well", "known"]
    assert word_errors("I have twenty one apples.", "i have 21 Apples").rate == 0.0
    assert number_words(1984) == "one thousand nine hundred eighty four"
    assert normalize_text("2.5%") == ["two", "point", "five", "percent"]


def test_counts_substitutions_deletions_insertions() -> None:
    e = word_errors("ever tried ever failed", "ever cried failed again")
    assert e.errors == 3 and e.ref_words == 4  # 3 edits however the tie is broken (jiwer: 3 substitutions)
    assert abs(e.rate - 0.75) < 1e-9
    e = word_errors("no matter try again", "matter try again now")
    assert (e.substitutions, e.deletions, e.insertions) == (0, 1, 1)
    e = word_errors("fail again fail better", "fail a gain fail better")
    assert (e.substitutions, e.deletions, e.insertions) == (1, 0, 1)
    assert word_errors("a b", "").deletions == 2 and word_errors("", "a b").insertions == 2
    assert word_errors("", "").rate == 0.0 and word_errors("", "x").rate == 1.0


def test_years_written_as_digits_or_words_are_the_same_words() -> None:
    """Both sides go through the TTS normalizer first: "1984" is read "nineteen eighty four", as a speaker says it."""
    assert word_errors("in 1984", "in nineteen eighty four").errors == 0
    assert word_errors("It costs $3.50 at 10:30.", "it costs three dollars and fifty cents at ten thirty").errors == 0
    assert word_errors("Dr. Smith came", "doctor smith came").errors == 0


def test_the_unused_wer_shortcut_is_gone() -> None:
    import voxcli.bench.wer as w

    assert not hasattr(w, "wer")  # word_errors(...).rate is the one way
