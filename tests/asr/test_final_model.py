"""Two passes: the fast model's captions, the accurate model's final (`ASRStreamer.final_model`).

Why: through the issue's room fixture the barging-in user's first words are rebuilt from under the echo
(`voxcli.audio.echo_mask`), and the fast tier mishears them ("It was best at times"): the 48 recorded
barge-ins of 2026-12-03 decoded once, whole, gave WER 0.052 with moonshine-tiny-en and 0.010-0.021 with
moonshine-base-en (`benchmarks/aec_session.py words --model`). The accurate model decodes only the
unforced finals (and cuts), ~0.2 s for 3.5 s of speech on one thread, inside the 0.5 s endpoint hold.
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
    assert final.calls and all(p is None for p in final.prompts)  # unforced decodes only: the finals
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
