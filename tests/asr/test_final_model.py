"""Two passes: the fast model's captions, the accurate model's final (`ASRStreamer.final_model`).

Why: through the issue's room fixture the barging-in user's first words are rebuilt from under the echo
(`voxcli.audio.echo_mask`), and the fast tier mishears them ("It was best at times"): the 48 recorded
barge-ins of 2026-12-03 decoded once, whole, gave WER 0.052 with moonshine-tiny-en and 0.010-0.021 with
moonshine-base-en (`benchmarks/aec_session.py words --model`). The accurate model decodes the unforced finals
(and cuts), ~0.2 s for 3.5 s of speech on one thread, inside the 0.5 s endpoint hold, and the forced retry of a
final that cannot be lined up with the committed words.
Both real models, chat's streamer settings, lockstep (the same decodes each run).
"""
from __future__ import annotations

import pytest

from tests.asr.chat_streamer import SR, Recorded, covered_clip, ended, run_patched
from voxcli.asr.models import ACCURATE_ASR, load_engine
from voxcli.events import Caption
from voxcli.hub.resolve import resolve_model


@pytest.fixture(scope="module")
def accurate():  # type: ignore[no-untyped-def]
    try:
        bundle = resolve_model(ACCURATE_ASR, kind="asr", offline=True)
    except Exception as e:  # noqa: BLE001 - the README's test command pulls it; say so where it is missing
        pytest.fail(f"{ACCURATE_ASR} is not in the cache ({e}): run the README's test command")
    return load_engine(bundle, threads=1)


def _words(ws) -> list[str]:  # type: ignore[no-untyped-def]
    return [w.text for w in ws]


def test_the_final_is_the_accurate_models_and_the_captions_the_fast_ones(moonshine, vad_path, speech_samples,
                                                                         accurate) -> None:
    audio, *_ = covered_clip(speech_samples)
    fast, final = Recorded(moonshine), Recorded(accurate)
    caps: list[Caption] = []
    text = run_patched(fast, vad_path, audio, None, after=0, captions=caps, final_model=final)
    caps = ended(caps)
    assert final.calls and all(p is None for p in final.prompts)  # unforced: on this clip the final lines up
    assert len(fast.calls) > len(final.calls)  # every re-decode of the captions on the fast one
    finals = [c for c in caps if c.is_final]
    assert len(finals) == 1 and finals[0].stable == text
    # The transcript is the accurate model's last decode (its words extend what the fast one committed).
    assert text.split() == _words(final.words[-1]), (text, _words(final.words[-1]))
    assert text.lower().startswith("it was the best of times"), text


def test_a_patched_utterance_commits_nothing_before_the_accurate_final(moonshine, vad_path, speech_samples,
                                                                       accurate) -> None:
    """The fast model's guesses at a rebuilt first word would be committed after `PATCH_COMMIT_S` and then
    outvote the final (the ratchet keeps shown words): with a final model the whole utterance waits for it."""
    audio, covered, lo, hi = covered_clip(speech_samples)
    start = lo - int(0.3 * SR)  # chat's span: 0.3 s before the onset, rebuilt up to after the pause
    caps: list[Caption] = []
    final = Recorded(accurate)
    text = run_patched(Recorded(moonshine), vad_path, covered, (start, audio[start : hi + 3200]), after=hi + 3200,
                       captions=caps, final_model=final)
    caps = ended(caps)
    shown = [c for c in caps if not c.is_final]
    assert shown and all(not c.stable for c in shown) and any(c.volatile for c in shown), shown
    assert caps[-1].is_final and caps[-1].stable == text
    assert text.split() == _words(final.words[-1])
    assert text.lower().startswith("it was the best of times"), text


def test_a_final_that_cannot_be_lined_up_is_decoded_again_forced_on_the_accurate_model(
        moonshine, vad_path, speech_samples, accurate, monkeypatch) -> None:
    """Where the unforced final cannot be placed after the committed words (`LocalAgreement.lines_up`: "one two
    three" heard as "1-2-3"), it is decoded again forced with them: on the accurate model too, not the fast one."""
    from voxcli.asr.agreement import LocalAgreement

    order: list[tuple[str, str | None]] = []

    class Logged(Recorded):
        def __init__(self, model, tag: str) -> None:  # type: ignore[no-untyped-def]
            super().__init__(model)
            self.tag = tag

        def transcribe(self, audio, prompt=None, **kw):  # type: ignore[no-untyped-def]
            order.append((self.tag, prompt))
            return super().transcribe(audio, prompt, **kw)

    audio, *_ = covered_clip(speech_samples)
    fast, final = Logged(moonshine, "fast"), Logged(accurate, "final")
    monkeypatch.setattr(LocalAgreement, "lines_up", lambda self, words: not self.stable[self.frozen:])
    text = run_patched(fast, vad_path, audio, None, after=0, final_model=final)
    assert order[-2][0] == "final" and order[-2][1] is None, order[-3:]  # the unforced final, then
    assert order[-1][0] == "final" and order[-1][1], order[-3:]  # its retry forced with the committed words
    assert text.lower().startswith("it was the best of times"), text
