from voxcli.bench.wer import normalize_text, number_words, word_errors


def test_normalization_ignores_case_punctuation_and_number_spelling() -> None:
    assert normalize_text("It's 42, the 3rd -- well-known!") == ["it's", "forty", "two", "the", "third", "well", "known"]
    assert word_errors("I have twenty one apples.", "i have 21 Apples").rate == 0.0
    assert number_words(1984) == "one thousand nine hundred eighty four"
    assert normalize_text("2.5%") == ["two", "point", "five", "percent"]


def test_counts_substitutions_deletions_insertions() -> None:
    e = word_errors("ever tried ever failed", "ever cried failed again")
    assert (e.substitutions, e.deletions, e.insertions, e.ref_words) == (1, 1, 1, 4)
    assert abs(e.rate - 0.75) < 1e-9
    assert word_errors("", "").rate == 0.0 and word_errors("", "x").rate == 1.0
