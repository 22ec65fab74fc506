"""`--agreement 1` as in the seed (#13 item 9): the naive policy shows every hypothesis, so its stable
text flickers (counted), while the final transcript is still the authoritative final decode."""
from __future__ import annotations

from tests.asr_checks import TWO_CITIES_REF, assert_stable_never_shrinks, caption_retractions, feed
from voxcli.asr.batch import transcribe_audio
from voxcli.asr.streamer import ASRStreamer
from voxcli.audio.files import read_audio
from voxcli.bench.wer import word_errors
from voxcli.runtimes.silero_vad import SileroVAD

SR = 16000


def stream(model, vad_path, audio, agreement: int):
    s = ASRStreamer(model, SileroVAD.load(vad_path), agreement=agreement, lockstep=True)
    text, caps, _ = feed(s, audio)
    return text, assert_stable_never_shrinks(caps, agreement), s


def test_agreement_1_flickers_and_its_final_transcript_is_the_batch_one(moonshine, vad_path, speech_samples) -> None:
    audio = read_audio(speech_samples["two_cities"], rate=SR)[0]
    batch = " ".join(u.text for u in transcribe_audio(moonshine, SileroVAD.load(vad_path), audio))
    text1, caps1, s1 = stream(moonshine, vad_path, audio, 1)
    text2, _, s2 = stream(moonshine, vad_path, audio, 2)
    # n = 1 takes shown words back (the display flickers), and says so.
    assert s1.stats.retractions >= 10 and s1.stats.flicker_words >= s1.stats.retractions
    # The streamer's count (what `bench asr` reports) is what a viewer of the captions would count.
    assert caption_retractions(caps1) == s1.stats.retractions
    assert s1.stats.retractions > s2.stats.retractions  # n = 2 damps it (only final corrections remain)
    # ... yet the transcript as emitted (the finals) is within a point of batch, for both.
    w_batch = word_errors(TWO_CITIES_REF, batch).rate
    assert word_errors(TWO_CITIES_REF, text1).rate <= w_batch + 0.01, (text1, batch)
    assert word_errors(TWO_CITIES_REF, text2).rate <= w_batch + 0.01, (text2, batch)
    assert s1.stats.to_dict()["retractions"] == s1.stats.retractions
