"""The thread budget of `chat`: every model gets a share that fits the cores."""
from __future__ import annotations

import pytest

from voxcli.chat.models import MAX_THREADS, ThreadBudget, thread_budget


@pytest.mark.parametrize("cores, local, expected", [
    (1, True, ThreadBudget(tts=1, asr=1, vad=1, llm=1)),
    (2, True, ThreadBudget(tts=1, asr=1, vad=1, llm=1)),
    (3, True, ThreadBudget(tts=2, asr=1, vad=1, llm=1)),
    (4, True, ThreadBudget(tts=2, asr=2, vad=1, llm=2)),
    (2, False, ThreadBudget(tts=2, asr=1, vad=1, llm=0)),
    (64, True, ThreadBudget(tts=4, asr=4, vad=1, llm=4)),
])
def test_budget_table(cores, local, expected) -> None:
    assert thread_budget(cores, local_llm=local) == expected


@pytest.mark.parametrize("cores", range(2, 33))
def test_the_models_that_run_together_fit_the_cores(cores) -> None:
    b = thread_budget(cores)
    assert b.tts + b.llm <= cores  # the voice speaks while the LLM writes
    assert b.asr <= cores and b.vad == 1
    assert all(1 <= n <= MAX_THREADS for n in (b.tts, b.asr, b.llm))


def test_default_is_this_machine(monkeypatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert thread_budget() == ThreadBudget(tts=1, asr=1, vad=1, llm=1)
    monkeypatch.setattr("os.cpu_count", lambda: None)
    assert thread_budget().llm == 1


_PROBE = """
import json
from voxcli.chat.models import ThreadBudget, open_chat_models
m = open_chat_models(url="http://127.0.0.1:9/v1", budget=ThreadBudget(tts=1, asr=2, llm=0), max_tokens=16)
intra = lambda s: s.get_session_options().intra_op_num_threads
spin = lambda s: [s.get_session_options().get_session_config_entry(f"session.{p}.allow_spinning") for p in ("intra_op", "inter_op")]
sessions = [*m.voice.engine.sessions(), m.asr.model.encoder, m.asr.model.decoder, m.vad.session]
print(json.dumps({"llm": [type(m.llm).__name__, m.llm.max_tokens],
                  "tts": sorted({intra(s) for s in m.voice.engine.sessions()}),
                  "asr": sorted({intra(m.asr.model.encoder), intra(m.asr.model.decoder)}),
                  "vad": intra(m.vad.session), "spinning": sorted({v for s in sessions for v in spin(s)})}))
m.asr.cancel()
"""


def test_open_chat_models_gives_each_model_its_share(real_cache) -> None:
    """The budget reaches every session (a server answers: no LLM share). A fresh process, because a
    voice is loaded once per process and the first load's threads stay."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "llm": ["OpenAICompatClient", 16], "tts": [1], "asr": [2], "vad": 1, "spinning": ["0"]}


def test_the_local_llm_gets_the_llm_share(real_cache) -> None:
    """Without a URL the on-device model is configured with `budget.llm` threads."""
    from voxcli.llm import open_llm

    llm = open_llm(None, threads=thread_budget(2).llm)
    assert llm.config.threads == 1
    opts = llm.engine._session.get_session_options()  # spinning off here too (issue 13, item 7)
    assert opts.intra_op_num_threads == 1
    assert opts.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_a_reply_of_the_on_device_llm_starts_with_a_short_first_chunk(real_cache) -> None:
    """chat's TTS factory: the on-device LLM's reply is first spoken after `LOCAL_FIRST_WORDS` words (each
    word more is LLM time before the voice starts); a server's after the chunker's default."""
    from voxcli.chat.models import LOCAL_FIRST_WORDS, ChatModels
    from voxcli.events import AudioChunk
    from voxcli.tts.chunker import ChunkerConfig
    from voxcli.tts.streamer import load_voice

    voice = load_voice()

    def texts(budget: ThreadBudget) -> list[str]:
        stream = ChatModels(llm=None, voice=voice, asr=None, vad=None, budget=budget).open_reply_stream()
        for word in "The capital of France is Paris.".split(" "):  # as an LLM writes it, word by word
            stream.send(word + " ")
        stream.finish()
        return [c.text for c in stream.output if isinstance(c, AudioChunk) and c.kind == "audio" and c.text]

    local, server = texts(ThreadBudget(tts=1, asr=1, llm=1)), texts(ThreadBudget(tts=2, asr=1, llm=0))
    assert LOCAL_FIRST_WORDS < ChunkerConfig().first_words
    assert len(local[0].split()) == LOCAL_FIRST_WORDS and len(server[0].split()) == ChunkerConfig().first_words
    assert " ".join(local).split() == " ".join(server).split() == "The capital of France is Paris.".split()


def test_a_reply_of_the_on_device_llm_pushes_back_once_its_lead_is_full(real_cache) -> None:
    """The on-device LLM stops writing while LOCAL_LEAD_CHARS wait to be synthesized (chat's send waits):
    a flat-out LLM beside the voice and the barge-in ASR took the core the voice needed (issue 13 item 7).
    A server's reply costs no local core: its stream takes the text as it comes."""
    from voxcli.chat.models import LOCAL_LEAD_CHARS, ChatModels
    from voxcli.tts.streamer import load_voice

    voice = load_voice()
    sentence = "The fox ran home over the hill and slept until the sun came up again. "
    reply = sentence * (3 * LOCAL_LEAD_CHARS // len(sentence) + 1)

    def accepted(budget: ThreadBudget) -> tuple[int, int]:
        """Characters taken by send(block=False) before it pushed back; the most that waited at once."""
        stream = ChatModels(llm=None, voice=voice, asr=None, vad=None, budget=budget).open_reply_stream()
        taken = most = 0
        try:
            for i in range(0, len(reply), 8):  # LLM-sized deltas, nobody plays the audio
                stream.send(reply[i : i + 8], block=False)
                taken += len(reply[i : i + 8])
                most = max(most, stream.pending_chars)
        except BufferError:
            pass
        finally:
            stream.cancel()
        return taken, most

    local_taken, local_most = accepted(ThreadBudget(tts=1, asr=1, llm=1))
    server_taken, _ = accepted(ThreadBudget(tts=2, asr=1, llm=0))
    assert server_taken == len(reply)
    assert LOCAL_LEAD_CHARS <= local_taken < len(reply)
    assert local_most < LOCAL_LEAD_CHARS + 8
