"""The one onnxruntime session policy, checked on the real models' sessions.

Before issue 12 only Piper turned thread spinning off; Moonshine and Silero
used onnxruntime's defaults, so in `chat` their idle pools busy-waited on the
cores the voice and the LLM needed.
"""
from __future__ import annotations

import pytest

from voxcli.runtimes.moonshine import MoonshineASR
from voxcli.runtimes.onnx import PROVIDERS, default_threads, session, session_options
from voxcli.runtimes.piper.voice import PiperVoice
from voxcli.runtimes.silero_vad import SileroVAD


def _policy(sess) -> tuple:
    o = sess.get_session_options()
    return (o.get_session_config_entry("session.intra_op.allow_spinning"),
            o.get_session_config_entry("session.inter_op.allow_spinning"),
            o.inter_op_num_threads, str(o.execution_mode), str(o.graph_optimization_level),
            tuple(sess.get_providers()))


POLICY = ("0", "0", 1, "ExecutionMode.ORT_SEQUENTIAL", "GraphOptimizationLevel.ORT_ENABLE_ALL", PROVIDERS)


def test_every_runtime_session_follows_the_policy(voice_bundle, asr_bundle, vad_bundle, tmp_path) -> None:
    voice = PiperVoice.load(voice_bundle.file("en_US-joe-medium.onnx"), derived_dir=tmp_path / "derived", threads=1)
    asr = MoonshineASR.load(asr_bundle.path, threads=1)
    vad = SileroVAD.load(vad_bundle.file("silero_vad.onnx"))
    sessions = {
        "piper front": voice.sessions()[0], "piper flow": voice.sessions()[1], "piper decoder": voice.sessions()[2],
        "moonshine encoder": asr.encoder, "moonshine decoder": asr.decoder, "silero": vad.session,
    }
    assert {name: _policy(s) for name, s in sessions.items()} == {name: POLICY for name in sessions}
    assert {name: s.get_session_options().intra_op_num_threads for name, s in sessions.items()} == {
        name: 1 for name in sessions}


def test_threads_default_to_the_cores_capped_and_reject_zero(monkeypatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert default_threads() == 4 and default_threads(2) == 2
    assert session_options().intra_op_num_threads == 4
    monkeypatch.setattr("os.cpu_count", lambda: None)
    assert default_threads() == 1
    with pytest.raises(ValueError):
        session_options(0)


def test_session_takes_serialized_bytes(vad_bundle) -> None:
    data = vad_bundle.file("silero_vad.onnx").read_bytes()
    assert _policy(session(data, threads=2))[0] == "0"
