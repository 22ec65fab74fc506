"""An utterance that begins at a patched span is decoded after `PATCH_LEAD_S` of silence.

Chat's rebuilt first word starts 0.3 s before a barge-in's onset, and between utterances the streamer keeps
nothing before it: decoded from its first sample, the patched audio came out "It was best of times" where a
one-shot decode of the same audio heard "It was the best of times" (benchmarks/replay_barge_in.py). The
decoder now gets the silence a VAD-started utterance has before its first word; nothing else changes.
"""
from __future__ import annotations

import numpy as np

from tests.asr.chat_streamer import SR, Recorded, covered_clip, run_patched
from voxcli.asr.buffer import PATCH_LEAD_S

LEAD = int(PATCH_LEAD_S * SR)


def _opened(model: Recorded, span: np.ndarray) -> list[np.ndarray]:
    """The decodes of the utterance that began at `span`: the lead-in's silence, then the span sample for sample;
    none may begin with the span itself (a decode without the lead-in)."""
    assert not any(a.size >= LEAD and np.array_equal(a[:LEAD], span[:LEAD]) for a in model.calls)
    opened = [a for a in model.calls if a.size > LEAD + span.size // 2 and not np.any(a[:LEAD])]
    for a in opened:
        np.testing.assert_array_equal(a[LEAD : LEAD + span.size], np.clip(span, -1, 1)[: a.size - LEAD])
    return opened


def test_a_patched_utterance_is_decoded_after_the_lead_in_and_a_plain_one_is_not(
        moonshine, vad_path, speech_samples) -> None:
    """The patch lands before the VAD starts the utterance: the utterance joins it (`_ingest`)."""
    audio, covered, lo, hi = covered_clip(speech_samples)
    start = lo - int(0.3 * SR)  # chat's span: 0.3 s before the onset, rebuilt up to after the pause
    span = audio[start : hi + 3200]
    patched = Recorded(moonshine)
    text = run_patched(patched, vad_path, covered, (start, span), after=hi + 3200)
    assert patched.before_patch == 0 and text.lower().startswith("it was"), text
    assert len(_opened(patched, span)) >= 2  # the re-decodes and the final
    plain = Recorded(moonshine)
    run_patched(plain, vad_path, audio, None, after=0)
    assert plain.calls and not any(a.size > LEAD and not np.any(a[:LEAD]) for a in plain.calls)


def test_a_running_utterance_that_moves_back_to_a_patch_gets_the_lead_in(moonshine, vad_path, speech_samples) -> None:
    """The patch lands after the VAD started the utterance (none of its words stable yet): the utterance moves
    back to the patch (`_patch`), and its decodes from then on get the lead-in."""
    audio, covered, lo, hi = covered_clip(speech_samples)
    start = lo - int(0.3 * SR)
    span = audio[start : hi + 3200]
    patched = Recorded(moonshine)
    run_patched(patched, vad_path, covered, (start, span), after=hi, on_start=True)
    assert patched.before_patch >= 0  # it was sent once the VAD had started the utterance
    assert len(_opened(patched, span)) >= 2
