"""The on-device LLM (SmolLM2-135M-Instruct GGUF -> onnxruntime) against its numpy reference.

Real weights from the package index (registry bundle `smollm2-135m-instruct`);
the model is loaded once per session. Speed is measured in
benchmarks/bench_llm.py, not here.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from voxcli.llm.base import METRIC_KEYS, LLMClient
from voxcli.runtimes.smollm.local import GGUF_FILE, LocalLLM, LocalLLMConfig
from voxcli.runtimes.smollm.prompt import DEFAULT_SYSTEM, fit_messages, render_turn

FRANCE = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="session")
def gguf_path(llm_bundle):
    return llm_bundle.file(GGUF_FILE)


@pytest.fixture(scope="session")
def llm(llm_bundle, gguf_path) -> LocalLLM:
    """The shipped configuration (precision='fast')."""
    return LocalLLM.load(gguf_path, llm_bundle.derived_dir)


@pytest.fixture(scope="session")
def exact_llm(llm_bundle, gguf_path) -> LocalLLM:
    return LocalLLM.load(gguf_path, llm_bundle.derived_dir, LocalLLMConfig(precision="exact"))


@pytest.fixture(scope="session")
def reference_logits(gguf_path, llm):
    """Numpy reference logits for the France prompt: prefill, then 4 greedy tokens."""
    from tests.llm.reference import ReferenceCache, ReferenceLlama

    ref = ReferenceLlama.load(gguf_path)
    prompt = fit_messages(FRANCE, llm.tokenizer.encode, 4096).ids
    cache = ReferenceCache()
    rows = [ref.forward(prompt, cache)[-1]]
    fed: list[int] = []
    for _ in range(4):
        fed.append(int(np.argmax(rows[-1])))
        rows.append(ref.forward([fed[-1]], cache)[-1])
    del ref  # 0.5 GB of float32 weights
    return prompt, fed, np.stack(rows)


def test_local_llm_satisfies_the_client_protocol(llm):
    assert isinstance(llm, LLMClient)


def test_tokenizer_from_gguf_round_trips_and_keeps_control_tokens(llm):
    text = "<|im_start|>user\nnaïve café, 2024!<|im_end|>\n"
    ids = llm.tokenizer.encode(text)
    assert ids[0] == llm.tokenizer.encode("<|im_start|>")[0] and len(llm.tokenizer.encode("<|im_start|>")) == 1
    assert llm.tokenizer.im_end_id in ids
    assert llm.tokenizer.decode(ids) == "user\nnaïve café, 2024!\n"  # control tokens skipped


def test_exact_graph_logits_match_numpy_reference(exact_llm, reference_logits):
    prompt, fed, ref = reference_logits
    got = exact_llm.logits_for(prompt, fed)
    assert got.shape == ref.shape
    # fp32 everywhere, only summation order differs: measured 1.4e-4 on logits of magnitude ~28
    assert np.abs(got - ref).max() < 5e-3
    assert (got.argmax(-1) == ref.argmax(-1)).all()


def test_fast_graph_tracks_reference(llm, reference_logits):
    prompt, fed, ref = reference_logits
    got = llm.logits_for(prompt, fed)
    # int8 activations (as llama.cpp): measured max 2.5 off, same greedy tokens
    assert (got.argmax(-1) == ref.argmax(-1)).all()
    assert np.abs(got - ref).max() < 5.0
    assert np.corrcoef(got[0], ref[0])[0, 1] > 0.99


def test_chunked_prefill_equals_one_pass(exact_llm, monkeypatch):
    import voxcli.runtimes.smollm.local as local

    ids = exact_llm.tokenizer.encode("The history of the lighthouse at the northern cape. " * 60)[:600]
    monkeypatch.setattr(local, "PREFILL_CHUNK", 128)
    chunked = exact_llm.logits_for(ids, ids[:2])  # 128-token runs into the in-place KV buffers
    monkeypatch.setattr(local, "PREFILL_CHUNK", 10_000)
    whole = exact_llm.logits_for(ids, ids[:2])
    assert np.abs(chunked - whole).max() < 1e-3


def test_next_turn_reuses_the_cached_conversation(llm):
    first = FRANCE
    reply = llm.complete(first, max_new_tokens=32)
    second = first + [{"role": "assistant", "content": reply},
                      {"role": "user", "content": "And what is the capital of Italy?"}]
    warm = list(llm.stream(second, max_new_tokens=32))
    llm.reset_cache()
    cold = list(llm.stream(second, max_new_tokens=32))
    assert warm[-1].metrics["cached_tokens"] >= 30  # system + first question at least
    assert cold[-1].metrics["cached_tokens"] == 0
    warm_text, cold_text = ("".join(d.text for d in x) for x in (warm, cold))
    assert warm_text == cold_text and "Rome" in warm_text


def test_capital_of_france_with_fixed_seed(llm):
    deltas = list(llm.stream(FRANCE, temperature=0.3, top_p=0.9, seed=7, max_new_tokens=48))
    text = "".join(d.text for d in deltas)
    assert "Paris" in text
    final = deltas[-1]
    assert final.is_final and sum(d.is_final for d in deltas) == 1
    assert set(METRIC_KEYS) <= set(final.metrics)
    assert final.metrics["tokens"] >= 2 and final.metrics["prompt_tokens"] > 10
    assert 0 < final.metrics["ttft_s"] <= final.metrics["total_s"]
    assert [d.index for d in deltas] == list(range(len(deltas)))
    again = "".join(d.text for d in llm.stream(FRANCE, temperature=0.3, top_p=0.9, seed=7, max_new_tokens=48))
    assert again == text  # the seed makes sampling reproducible


def test_greedy_answer_mentions_paris(llm):
    assert "Paris" in llm.complete(FRANCE, max_new_tokens=32)


def test_cancel_mid_generation_stops_within_one_token(llm):
    story = [{"role": "user", "content": "Tell me a long story about a lighthouse keeper."}]
    seen, after_cancel = 0, 0
    final = None
    cancelled_at = None
    for d in llm.stream(story, max_new_tokens=200):
        if d.is_final:
            final = d
            break
        if cancelled_at is not None:
            after_cancel += 1
        seen += 1
        if seen == 5:
            t = threading.Thread(target=llm.cancel)  # as a barge-in would, from another thread
            t.start()
            t.join()
            cancelled_at = time.perf_counter()
    assert final is not None and final.metrics.get("cancelled") == 1.0
    assert after_cancel <= 1
    assert final.metrics["tokens"] <= 6
    # the model is usable again right after a cancel
    assert "Paris" in llm.complete(FRANCE, max_new_tokens=32)


def test_barge_in_abandoned_stream_does_not_block_the_next_one(llm):
    story = [{"role": "user", "content": "Tell me a long story about a dragon."}]
    old = llm.stream(story, max_new_tokens=100)
    assert not next(old).is_final
    llm.cancel()  # the chat loop stops reading `old` and starts a new turn right away
    assert "Paris" in llm.complete(FRANCE, max_new_tokens=32)
    rest = list(old)  # the abandoned stream still ends with exactly one final, marked cancelled
    assert rest[-1].is_final and rest[-1].metrics["cancelled"] == 1.0 and len(rest) <= 2


def test_cancel_before_iteration_applies(llm):
    gen = llm.stream(FRANCE, max_new_tokens=32)
    llm.cancel()
    deltas = list(gen)
    assert len(deltas) == 1 and deltas[0].metrics["cancelled"] == 1.0 and deltas[0].metrics["tokens"] == 0


def test_bad_settings_are_usage_errors(llm):
    from voxcli.errors import UsageError

    with pytest.raises(UsageError):
        llm.stream(FRANCE, context_window=100_000)
    with pytest.raises(UsageError):
        llm.stream(FRANCE, max_new_tokens=0)
    with pytest.raises(UsageError):
        llm.stream([{"role": "robot", "content": "hi"}])


def test_cancel_aborts_a_long_prefill(llm, monkeypatch):
    import voxcli.runtimes.smollm.local as local
    from voxcli.runtimes.smollm.kv_cache import KVCache

    monkeypatch.setattr(local, "PREFILL_CHUNK", 4096)  # the whole prompt in one onnxruntime run
    started = threading.Event()
    real_run = KVCache.run

    def run(self, ids, run_options=None):
        started.set()
        return real_run(self, ids, run_options)

    monkeypatch.setattr(KVCache, "run", run)
    long_msg = [{"role": "user", "content": "Summarize: " + "the quick brown fox jumps over the lazy dog. " * 150}]

    def cancel_once_running():
        started.wait(30)
        time.sleep(0.02)
        llm.cancel()

    t = threading.Thread(target=cancel_once_running)
    t.start()
    deltas = list(llm.stream(long_msg, max_new_tokens=50))
    t.join()
    assert deltas[-1].is_final and deltas[-1].metrics.get("cancelled") == 1.0
    assert deltas[-1].metrics["tokens"] == 0 and len(deltas) == 1
    # RunOptions.terminate aborted the ~1,500-token run: nothing was appended to the
    # cache beyond the prefix reused from an earlier conversation
    assert llm._cache is not None and llm._cache.length == deltas[-1].metrics["cached_tokens"] < 100


def _conversation(n_turns: int) -> list[dict]:
    msgs = [{"role": "system", "content": "You are a terse assistant. Answer in one sentence."}]
    for i in range(n_turns):
        msgs.append({"role": "user", "content": f"Question {i}: tell me fact number {i} about rivers and mountains."})
        msgs.append({"role": "assistant", "content": f"Fact {i}: rivers carve valleys between mountains over many years."})
    msgs.append({"role": "user", "content": "What is the capital of France?"})
    return msgs


def test_long_conversation_is_truncated_oldest_first_keeping_system(llm):
    msgs = _conversation(60)
    encode = llm.tokenizer.encode
    whole = sum(len(encode(render_turn(m["role"], m["content"]))) for m in msgs)
    assert whole >= 2000
    cfg = LocalLLMConfig(context_window=1024, max_new_tokens=32)
    fitted = fit_messages(msgs, encode, cfg.context_window - cfg.max_new_tokens)
    assert len(fitted.ids) <= 1024 - 32
    assert fitted.dropped_turns > 0 and fitted.clipped_tokens == 0
    text = llm.tokenizer.decode(fitted.ids)
    assert text.startswith("system\nYou are a terse assistant.")
    assert text.rstrip().endswith("What is the capital of France?\nassistant")
    # the kept turns are exactly the newest ones, in order
    kept = msgs[1 + fitted.dropped_turns :]
    assert fitted.kept_roles == ["system"] + [m["role"] for m in kept]
    assert "Question 0:" not in text and f"Question {59}:" in text
    # and the engine applies the same policy, reporting it in the metrics
    deltas = list(llm.stream(msgs, context_window=cfg.context_window, max_new_tokens=cfg.max_new_tokens))
    m = deltas[-1].metrics
    assert m["prompt_tokens"] == len(fitted.ids)
    assert m["dropped_turns"] == fitted.dropped_turns
    assert "Paris" in "".join(d.text for d in deltas)


def test_single_oversized_message_keeps_its_end():
    encode = lambda s: list(s.encode())  # one id per byte: exact, model-free arithmetic
    msgs = [{"role": "user", "content": "x" * 500 + "THE END"}]
    fitted = fit_messages(msgs, encode, 200)
    assert len(fitted.ids) <= 200 and fitted.clipped_tokens > 0
    assert bytes(fitted.ids).decode().endswith("THE END<|im_end|>\n<|im_start|>assistant\n")
    assert bytes(fitted.ids).decode().startswith(render_turn("system", DEFAULT_SYSTEM))


def test_graph_and_tokenizer_are_built_once_then_loaded_without_parsing_the_gguf(gguf_path, tmp_path, monkeypatch):
    import voxcli.runtimes.smollm.gguf as gr

    derived = tmp_path / "derived"
    first = LocalLLM.load(gguf_path, derived)
    built = sorted(p.name for p in derived.iterdir() if not p.name.endswith(".lock"))
    assert any(n.endswith(".onnx") for n in built) and any(n.endswith(".onnx.data") for n in built)
    assert not [n for n in built if n.startswith(".")]  # no temp leftovers
    mtimes = {p.name: p.stat().st_mtime_ns for p in derived.iterdir()}

    def no_parse(*a, **k):
        raise AssertionError("the GGUF was parsed on a warm load")

    monkeypatch.setattr(gr.GGUFModel, "__init__", no_parse)
    second = LocalLLM.load(gguf_path, derived)
    assert {p.name: p.stat().st_mtime_ns for p in derived.iterdir()} == mtimes
    ids = second.tokenizer.encode(render_turn("user", "Hello there"))
    assert ids == first.tokenizer.encode(render_turn("user", "Hello there"))
    assert np.array_equal(first.logits_for(ids), second.logits_for(ids))


def test_load_local_llm_resolves_the_registry_model(real_cache, llm_bundle):
    from voxcli.llm import open_llm
    from voxcli.runtimes.smollm.local import load_local_llm

    llm = load_local_llm(offline=True)
    assert llm.name.startswith("smollm2-135m-instruct")
    assert isinstance(open_llm(None), LocalLLM) and isinstance(open_llm("local"), LocalLLM)
    assert "Paris" in llm.complete(FRANCE, max_new_tokens=24)
