"""An utterance that begins at a patched span commits no stable word before `PATCH_COMMIT_S` of its audio.

Chat's barge-in utterances begin at its rebuilt first word. Replayed in lockstep over 88 saved barge-ins
(benchmarks/replay_barge_in.py --lockstep), the 1.3 and 1.8 s decodes agreed on "It was a best of times" and
the ratchet kept "a" where the unforced final heard "the" (WER 0.062; 0.054 with the rule; one-shot 0.044).
Its short decodes are now shown as volatile words only; a plain utterance commits as before.
"""
from __future__ import annotations

from tests.asr.chat_streamer import SR, Recorded, covered_clip, ended, run_patched
from voxcli.asr import streamer
from voxcli.asr.buffer import PATCH_COMMIT_S
from voxcli.config import DEFAULT_STEP_MS
from voxcli.events import Caption


def _first_stable_at(captions: list[Caption]) -> float:
    """The audio heard (s) when the first stable word was shown before the final."""
    return min(c.t_audio for c in captions if c.stable and not c.is_final)


def _patched_run(moonshine, vad_path, speech_samples) -> tuple[float, list[Caption], str]:
    """The patch lands before the VAD starts the utterance (it joins the patch); (span start s, captions, text)."""
    audio, covered, lo, hi = covered_clip(speech_samples)
    start = lo - int(0.3 * SR)  # chat's span: 0.3 s before the onset, rebuilt up to after the pause
    caps: list[Caption] = []
    text = run_patched(Recorded(moonshine), vad_path, covered, (start, audio[start : hi + 3200]), after=hi + 3200,
                       captions=caps)
    return start / SR, ended(caps), text


def test_a_patched_utterance_shows_its_short_decodes_as_volatile_then_commits(
        moonshine, vad_path, speech_samples, monkeypatch) -> None:
    start, caps, text = _patched_run(moonshine, vad_path, speech_samples)
    first = _first_stable_at(caps) - start
    early = [c for c in caps if not c.is_final and c.t_audio - start < PATCH_COMMIT_S - 0.04]
    assert early and all(not c.stable for c in early) and any(c.volatile for c in early), early
    # Two decodes from PATCH_COMMIT_S on must agree (a shown one does not count): a step later, at least.
    step = (getattr(moonshine, "step_ms", None) or DEFAULT_STEP_MS) / 1000
    assert PATCH_COMMIT_S + step - 0.04 <= first < caps[-1].t_audio - start  # and it commits before the final
    assert text.lower().startswith("it was the best of times"), text
    monkeypatch.setattr(streamer, "PATCH_COMMIT_S", 0.0)  # without the rule: the first agreement commits
    _, caps, again = _patched_run(moonshine, vad_path, speech_samples)
    assert _first_stable_at(caps) - start < first and again == text  # the same words here, committed sooner
    monkeypatch.setattr(streamer, "PATCH_COMMIT_S", 3.0)
    _, caps, _ = _patched_run(moonshine, vad_path, speech_samples)
    assert _first_stable_at(caps) - start >= 3.0 - 0.04


def test_a_plain_utterance_commits_without_waiting(moonshine, vad_path, speech_samples, monkeypatch) -> None:
    """The rule is the patched utterance's only: with it made longer than the clip, a plain one still commits."""
    audio, *_ = covered_clip(speech_samples)
    monkeypatch.setattr(streamer, "PATCH_COMMIT_S", 60.0)
    caps: list[Caption] = []
    run_patched(Recorded(moonshine), vad_path, audio, None, after=0, captions=caps)
    caps = ended(caps)
    assert _first_stable_at(caps) < caps[-1].t_audio
