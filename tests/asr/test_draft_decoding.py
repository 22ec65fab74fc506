"""Greedy decoding checked against a draft (issue 16: the accurate tier's final must fit in the endpoint hold).

The law (`draft_generate` keeps only the model's own argmax tokens) is checked on an exact scripted decoder,
where it holds token for token; on the real int8 model a multi-token call rounds a little differently, so
there the tests check behaviour: the draft never puts its own words in, and the streamer drafts only
unforced decodes, from the caption at the hold's onset.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

from tests.asr_checks import BECKETT_REF
from voxcli.asr.drafting import OnsetDraft
from voxcli.asr.streamer import ASRStreamer
from voxcli.audio.files import read_audio
from voxcli.bench.wer import word_errors
from voxcli.runtimes.moonshine import repeated_tail
from voxcli.runtimes.moonshine_draft import CHUNK, EARLY_EOS_MARGIN, draft_generate, first_token
from voxcli.runtimes.silero_vad import SileroVAD

BOS, EOS, VOCAB = 1, 2, 40
NAMES = ["past_key_values.0.decoder.key", "past_key_values.0.encoder.key"]


class ScriptedDecoder:
    """An exact decoder: the next token is a fixed function of the whole prefix, read from the KV cache
    (which here stores the tokens themselves), so any call pattern gives the same argmax per position."""

    def __init__(self, target: list[int]) -> None:
        self.target, self.calls, self.fed = target, 0, 0

    def next_token(self, prefix: list[int]) -> int:
        body = prefix[1:]
        if body == self.target[: len(body)]:
            return self.target[len(body)] if len(body) < len(self.target) else EOS
        return 3 + (sum(body) * 7 + len(body)) % (VOCAB - 3)  # off the script: still a function of the prefix

    def run(self, ids: np.ndarray, cache: dict, cached: bool):
        self.calls, self.fed = self.calls + 1, self.fed + ids.shape[1]
        past = [int(x) for x in cache[NAMES[0]].reshape(-1)] if cached else []
        seq = past + [int(x) for x in ids[0]]
        logits = np.zeros((1, ids.shape[1], VOCAB), dtype=np.float32)
        for i in range(ids.shape[1]):
            logits[0, i, self.next_token(seq[: len(past) + i + 1])] = 10.0  # decisive: no near-tie at EOS
        present = [np.array(seq, dtype=np.float32).reshape(1, 1, -1, 1), np.zeros((1, 1, 1, 1), np.float32)]
        return logits, present


def decode(target: list[int], draft: list[int], budget: int = 60) -> tuple[list[int], int]:
    out, d = decode_counted(target, draft, budget)
    return out, d.calls


def decode_counted(target: list[int], draft: list[int], budget: int = 60) -> tuple[list[int], ScriptedDecoder]:
    d = ScriptedDecoder(target)
    empty = {n: np.zeros((1, 1, 0, 1), np.float32) for n in NAMES}
    out = draft_generate(d.run, NAMES, empty, BOS, EOS, draft, budget, repeated_tail, lambda t: t == 3)
    return out, d


def test_any_draft_gives_the_greedy_tokens_and_a_good_one_fewer_calls() -> None:
    rng = np.random.default_rng(16)
    for _ in range(40):
        target = [int(x) for x in rng.integers(4, VOCAB, size=int(rng.integers(1, 30)))]
        greedy, greedy_calls = decode(target, [])
        assert greedy == target and greedy_calls == len(target) + 1  # one call per token, EOS included
        edited = list(target)
        for _ in range(3):  # a caption differs from the final: a dropped, an inserted and a replaced token
            k = int(rng.integers(0, len(edited) + 1))
            op = int(rng.integers(0, 3))
            if op == 0 and k < len(edited):
                del edited[k]
            elif op == 1:
                edited.insert(k, 3)
            elif k < len(edited):
                edited[k] = int(rng.integers(4, VOCAB))
        drafts = [target, target[: len(target) // 2], edited, [int(x) for x in rng.integers(4, VOCAB, size=25)],
                  target + [5, 6, 7]]
        for draft in drafts:
            assert decode(target, draft)[0] == target
        assert decode(target, target)[1] <= 1 + len(target) // 8 + 1


def test_a_garbage_draft_costs_about_greedy() -> None:
    """A draft that never matches must not make every call carry a chunk for one token out (it made the
    final 1.5x slower than greedy): after a call that confirms nothing the decode goes token by token."""
    rng = np.random.default_rng(61)
    for _ in range(40):
        target = [int(x) for x in rng.integers(4, VOCAB, size=int(rng.integers(10, 50)))]
        _, greedy = decode_counted(target, [])
        for garbage in ([int(x) for x in rng.integers(4, VOCAB, size=60)], [3] * 60, [37, 38, 39] * 20):
            out, d = decode_counted(target, garbage)
            assert out == target and d.calls <= greedy.calls
            assert d.fed <= greedy.fed + 4 * CHUNK  # the first chunk, a few false realignments (vocabulary of 40)
        _, good = decode_counted(target, target)
        assert good.calls <= 1 + len(target) // 8 + 1


def test_the_budget_and_a_loop_end_a_drafted_decode_as_they_end_greedy() -> None:
    target = list(range(4, 34))
    assert decode(target, target, budget=10)[0] == target[:10] == decode(target, [], budget=10)[0]
    looping = [9, 8] * 12  # repeated_tail keeps one copy of a block repeated 3 times
    assert decode(looping, looping)[0] == decode(looping, [])[0] == [9, 8]


def test_onset_draft_is_the_caption_when_the_hold_began() -> None:
    d = OnsetDraft()
    d.observe(None, True, ["we", "had"])
    assert d.words(["now"]) == ["now"]  # no hold: the caption now
    d.observe(16000, True, ["we", "had", "everything"])
    d.observe(16000, True, ["we", "had", "everything", "before"])  # a re-decode during the hold: same onset
    assert d.words(["x"]) == ["we", "had", "everything"]
    d.observe(None, False, ["ignored"])  # the hold completed (end of utterance): still the onset's caption
    assert d.words(["x"]) == ["we", "had", "everything"]
    d.observe(None, True, ["speech", "resumed"])
    assert d.words(["now"]) == ["now"]


def test_a_wrong_draft_never_puts_its_words_in(moonshine, speech_samples) -> None:
    audio = read_audio(speech_samples["beckett"], rate=16000)[0]
    plain = moonshine.text(audio)
    drafted = moonshine.text(audio, draft="banana " * 30)
    assert "banana" not in drafted.lower()
    assert word_errors(BECKETT_REF, drafted).rate <= word_errors(BECKETT_REF, plain).rate + 0.15
    assert moonshine.text(audio, prompt="Ever tried", draft="banana").lower().startswith("ever tried")  # forced wins


def test_a_near_miss_draft_does_not_win_a_word(moonshine, speech_samples) -> None:
    """A caption one sound off the truth (sailed/failed, dimes/times, best/worst: the drafts a re-decode
    really makes) is the draft most likely to tip a near-tie; the model's own word must still come out."""
    beckett = read_audio(speech_samples["beckett"], rate=16000)[0]
    cities = read_audio(speech_samples["two_cities"], rate=16000)[0][: 16000 * 14]
    near = "Ever tried, ever sailed, no matter, try again, fail again, fail worse."
    out = moonshine.text(beckett, draft=near).lower()
    assert "sailed" not in out and "worse" not in out and "failed" in out and "better" in out
    out = moonshine.text(cities, draft="It was the best of dimes. It was the best of dimes. It was the age of wisdom.")
    assert "dimes" not in out.lower() and "worst of times" in out.lower()


class DraftSpy:
    """The real model, recording (prompt, draft) of every call."""

    drafts = True

    def __init__(self, model) -> None:
        self.model, self.sample_rate, self.calls = model, model.sample_rate, []

    def transcribe(self, audio, prompt=None, draft=None):
        self.calls.append((prompt, draft))
        return self.model.transcribe(audio, prompt, draft=draft)


def test_the_streamer_drafts_unforced_decodes_only(moonshine, vad_path, speech_samples) -> None:
    audio = read_audio(speech_samples["two_cities"], rate=16000)[0][: 16000 * 14]
    spy = DraftSpy(moonshine)
    s = ASRStreamer(spy, SileroVAD.load(vad_path), lockstep=True)
    reader = threading.Thread(target=lambda: list(s.captions), daemon=True)
    reader.start()
    for i in range(0, audio.size, 1600):
        s.send(audio[i : i + 1600])
    text = s.finish()
    reader.join(60)
    assert text and not any(prompt and draft for prompt, draft in spy.calls)
    drafted = [draft for prompt, draft in spy.calls if draft]
    assert drafted and any(d.lower().startswith("it was the best of times") for d in drafted)  # the caption


def test_the_accurate_tier_streams_at_its_own_step_and_agreement(vad_path) -> None:
    from tests.whisper.conftest import engine

    base, _ = engine("moonshine-base-en")  # skipped with the pull command when it is not installed
    tiny, _ = engine("moonshine-tiny-en")
    assert (base.step_ms, base.agreement) == (750, 4)  # the catalog's, see its comment
    s = ASRStreamer(base, SileroVAD.load(vad_path))
    given = ASRStreamer(base, SileroVAD.load(vad_path), agreement=2, step_ms=500)
    fast = ASRStreamer(tiny, SileroVAD.load(vad_path))
    try:
        assert (s.agreement.n, s.step, given.agreement.n, given.step) == (4, 12000, 2, 8000)
        assert (fast.agreement.n, fast.step) == (2, 8000)
    finally:
        for x in (s, given, fast):
            x.finish(30)


def test_agreement_zero_is_an_error_not_the_models_default(moonshine, vad_path) -> None:
    """`agreement=None` means the model's n; 0 must still be refused (it was read as "unset" for a while)."""
    with pytest.raises(ValueError, match="agreement n must be >= 1"):
        ASRStreamer(moonshine, SileroVAD.load(vad_path), agreement=0)


def test_an_end_of_text_that_barely_wins_the_first_token_gives_way() -> None:
    row = np.array([0.0, 5.0, 9.3, 8.5], dtype=np.float32)  # EOS (2) ahead of the runner-up (3) by 0.8
    assert first_token(row, eos=2) == 3
    assert first_token(np.array([0.0, 1.0, 4.2, 1.0], np.float32), eos=2) == 2  # silence-like: 3.2 ahead
    assert first_token(np.array([0.0, 7.0, 6.9, 1.0], np.float32), eos=2) == 1  # not EOS: plain argmax
    assert 0.9 < EARLY_EOS_MARGIN < 3.2  # between the near-ties measured on speech and silence's lead


def test_base_does_not_lose_an_utterance_to_an_early_end(speech_samples) -> None:
    """moonshine-base-en (int8) decoded the first 9 s of two_cities.wav to "" (end-of-text ahead of "It" by
    0.7 logits at the first step); silence still decodes to nothing."""
    from tests.whisper.conftest import engine

    base, _ = engine("moonshine-base-en")  # skipped with the pull command when it is not installed
    audio = read_audio(speech_samples["two_cities"], 16000)[0][: 9 * 16000]
    assert base.text(audio).startswith("It was the best of times")
    assert base.text(audio, draft="It was the best of times, it was the worst of times.").startswith("It was the")
    assert base.text(np.zeros(9 * 16000, np.float32)) == ""
