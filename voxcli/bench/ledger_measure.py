"""Fill ledger terms from this machine (`voxcli ledger --measured`).

Each term says where its number came from, because a ledger mixing
measured and assumed figures is only honest if the reader can tell them apart:

- TTS first audio: a quick warm TTFA measurement on the local voice (median of
  a few runs of one sentence), else the latest `voxcli bench` history entry.
- ASR tail and its start: the installed streamer, run at real time with the
  knobs in force on real speech (`ledger_overlap`): the final decode alone
  (median of 3) and when it started after the end of speech, i.e. how much
  of it the engine really overlapped with the hold.
- Endpoint hold, agreement, step, TTS first chunk: the configuration in force
  (`engine_knobs`: config resolve(), else the engine's defaults).
- LLM first token: median `llm_ttft_ms` of the last turns in chat's turn log.
"""
from __future__ import annotations

import importlib.util
import statistics
from dataclasses import dataclass
from typing import Any, Callable

from voxcli.chat.models import HOLD_FROM
from voxcli.chat.turn_gate import ENDPOINT_MODES
from voxcli.errors import UsageError, VoxError

Note = Callable[[str], None]


@dataclass(frozen=True)
class Measurement:
    value_ms: float
    source: str
    """Short tag for the table: measured | bench history | config | env | engine default | turn log."""
    detail: str
    """One sentence: how it was obtained."""
    data: dict[str, Any] | None = None
    """The raw figures behind it (e.g. the overlap timeline), for --json."""

    def to_dict(self) -> dict[str, Any]:
        d = {"value_ms": round(self.value_ms, 2), "source": self.source, "detail": self.detail}
        return d if self.data is None else {**d, "data": self.data}


def measure_tts_first_audio(runs: int = 5, voice: str | None = None) -> Measurement:
    """Warm TTFA of one sentence on the local voice (1 warm-up, median of `runs`)."""
    import voxcli
    from voxcli.bench.ttfa import DEFAULT_TEXTS, run_once

    item = DEFAULT_TEXTS[1]
    v = voxcli.load_voice(voice)
    run_once(v, item)
    ttfa = [run_once(v, item).ttfa_ms for _ in range(runs)]
    return Measurement(statistics.median(ttfa), "measured",
                       f"median warm TTFA of {runs} runs of a {len(item.text)}-char sentence on this machine")


def tts_from_history() -> Measurement | None:
    from voxcli.bench.report import latest_metric

    found = latest_metric("ttfa_ms", "p50")
    if found is None:
        return None
    value, entry = found
    return Measurement(value, "bench history", f"TTFA p50 of the bench run at {entry.get('timestamp')}")


def measure_asr(knobs: Any, offline: bool | None = None) -> dict[str, Measurement] | None:
    """ASR tail and when it starts, from the installed streamer run with the knobs in force.

    None when the streaming ASR is not installed. See `voxcli.bench.ledger_overlap`.
    """
    if importlib.util.find_spec("voxcli.asr.streamer") is None:
        return None
    from voxcli.bench.ledger_overlap import measure_overlap

    from voxcli.config import resolve

    from voxcli.asr.models import chat_asr, chat_final_asr

    model, configured = resolve("asr.model"), resolve("chat.final_asr")
    final = chat_final_asr(configured, chat_asr(model))

    def measure(final_model: str | None) -> Any:
        return measure_overlap(hold_ms=knobs.endpoint_ms, agreement=knobs.agreement, step_ms=int(knobs.chunk_ms),
                               offline=offline, model=model, streamer_options={"hold_from": HOLD_FROM,
                                                                  "tail_from_speech": HOLD_FROM == "speech"},
                               final_model=final_model)

    try:
        o = measure(final)
    except Exception:  # noqa: BLE001 - a second pass chosen (not configured) that cannot load: chat runs one
        if final is None or configured is not None:
            raise
        o = measure(None)
    data = o.to_dict()
    how = (f"{len(o.runs)} real-time runs of the streamer, hold {o.hold_ms:.0f} ms, "
           + ("speculative final decode" if o.speculative else "final decode after the endpoint"))
    return {
        "asr_tail_ms": Measurement(o.tail_ms, "measured",
                                   "median of 3 final decodes of the last utterance of beckett.wav", data),
        "asr_start_ms": Measurement(o.asr_start_ms, "measured", (
            f"the final transcript existed {o.ready_ms:.0f} ms after the end of speech and reached the caller at "
            f"{o.final_ms:.0f} ms ({how}): the tail ran {o.overlap_ms:.0f} of a possible "
            f"{o.possible_overlap_ms:.0f} ms during the hold"), data),
        "endpoint_start_ms": Measurement(o.hold_start_ms, "measured", (
            f"the endpoint fired {o.confirm_ms:.0f} ms after the last speech sample: the hold started counting "
            f"{o.hold_start_ms:.0f} ms late (the VAD's decay)"), data),
    }


def engine_knobs(cfg: Any, network: str, endpoint: str | None = None) -> tuple[Any, dict[str, str]]:
    """The knobs the engine runs with: hold, agreement, step (the ASR "chunk") and the TTS first chunk.

    Read where the engine reads them (config resolve() and the engine defaults), each with its source;
    with chat's semantic endpoint (`asr.endpoint`, or `endpoint`) the hold is the detector's short hold.
    """
    from voxcli import config as C
    from voxcli.bench.ledger_knobs import Knobs
    from voxcli.chat.models import LOCAL_FIRST_WORDS

    keys = C.config_keys()

    def value(key: str, default: Any) -> tuple[Any, str]:
        if key not in keys:
            return default, "engine default"
        v = C.resolve(key, None, config=cfg)
        return (default if v is None else v), cfg.sources.get(key, "engine default")

    hold, hold_src = value("asr.endpoint_ms", C.DEFAULT_ENDPOINT_MS)
    if endpoint_mode(cfg, endpoint)[0] == "semantic":  # chat's streamer then holds the detector's short hold
        from voxcli.chat.turn_detector import HoldPolicy

        hold, hold_src = HoldPolicy().min_ms, "semantic short hold"
    n, n_src = value("asr.agreement", C.DEFAULT_AGREEMENT)
    step, step_src = value("asr.step_ms", C.DEFAULT_STEP_MS)
    words, words_src = value("tts.first_words", LOCAL_FIRST_WORDS)  # chat's first chunk, on-device LLM
    words = words or 12  # first chunk off: the first clause, assumed 12 words
    knobs = Knobs(chunk_ms=float(step), agreement=int(n), first_chunk_words=int(words),
                  endpoint_ms=float(hold), network=network)
    return knobs, {"endpoint_ms": hold_src, "agreement": n_src, "chunk_ms": step_src, "first_chunk_words": words_src}


def _turn_terms(term: str, last: int) -> list[float]:
    if importlib.util.find_spec("voxcli.chat.turnlog") is None:
        return []
    from voxcli.chat.turnlog import read_turns

    return [
        float(t["terms"][term])
        for t in read_turns(last=last)
        if isinstance(t.get("terms"), dict) and isinstance(t["terms"].get(term), (int, float))
    ]


def measured_turns(predicted_ms: float, last: int = 20, mode: str | None = None) -> dict[str, Any] | None:
    """The chat turns really measured (turn log `total_ms`; those of end of turn `mode` when the log tells them
    apart) next to the ledger's prediction; None without turns."""
    if mode is None:
        values = _turn_terms("total_ms", last)
    else:
        values = [float(r["terms"]["total_ms"]) for r in _mode_records(mode, last)[0]
                  if isinstance(r.get("terms"), dict) and isinstance(r["terms"].get("total_ms"), (int, float))]
    if not values:
        return None
    p50 = statistics.median(values)
    return {"turns": len(values), "total_ms_p50": round(p50, 2), "predicted_ms": round(predicted_ms, 2),
            "prediction_error_pct": round(100.0 * (predicted_ms - p50) / p50, 1) if p50 else None}


def llm_ttft_from_turn_log(last: int = 20) -> Measurement | None:
    values = _turn_terms("llm_ttft_ms", last)
    if not values:
        return None
    return Measurement(statistics.median(values), "turn log", f"median LLM first token of the last {len(values)} chat turns")


def measure_terms(cfg: Any, knobs: Any, knob_sources: dict[str, str], on_note: Note = lambda s: None,
                  offline: bool | None = None) -> dict[str, Measurement]:
    """Every term we can measure or read here; the others stay derived from the knobs (the caller marks them)."""
    out: dict[str, Measurement] = {}
    try:
        out["tts_first_audio_ms"] = measure_tts_first_audio(voice=cfg.tts.voice)
    except (VoxError, ImportError) as e:
        hist = tts_from_history()
        if hist is not None:
            out["tts_first_audio_ms"] = hist
        on_note(f"TTS first audio not measured ({e}); " + ("using the bench history" if hist else "assumed"))
    try:
        asr = measure_asr(knobs, offline=offline)
        if asr is not None:
            out.update(asr)
        else:
            on_note("ASR tail assumed: the streaming ASR is not installed")
    except (VoxError, ImportError, RuntimeError) as e:
        on_note(f"ASR tail assumed: {e}")
    src = knob_sources["endpoint_ms"]
    where = f"asr.endpoint_ms from the {src}" + (f" ({cfg.path})" if src == "config" else "")
    out["endpoint_ms"] = Measurement(knobs.endpoint_ms, "engine default" if src == "engine default" else src,
                                     f"the hold the engine uses: {where}")
    llm = llm_ttft_from_turn_log()
    if llm is not None:
        out["llm_ttft_ms"] = llm
    else:
        on_note("LLM first token assumed: no chat turns logged yet (run `voxcli chat`)")
    return out


def endpoint_mode(cfg: Any, flag: str | None = None) -> tuple[str, str]:
    """chat's end of turn in force (`asr.endpoint`: vad | semantic) and where that came from."""
    from voxcli import config as C

    v = str(C.resolve("asr.endpoint", flag, config=cfg) or "vad")
    if v not in ENDPOINT_MODES:  # as chat refuses it
        raise UsageError(f"asr.endpoint must be one of {', '.join(ENDPOINT_MODES)}, not {v!r}")
    return v, "flag" if flag else cfg.sources.get("asr.endpoint", "engine default")


def _turn_users(last: int) -> list[str]:
    if importlib.util.find_spec("voxcli.chat.turnlog") is None:
        return []
    from voxcli.chat.turnlog import read_turns

    return [str(t["user"]) for t in read_turns(last=last) if isinstance(t.get("user"), str) and t["user"].strip()]


def detector_holds(offline: bool | None = None, last: int = 20) -> tuple[tuple[float, ...], float, str]:
    """The semantic detector's hold for each recent user turn (turn log; else `SAMPLE_TURNS`), its median
    scoring time, and where the texts came from."""
    import time

    from voxcli.bench.ledger_engine import SAMPLE_TURNS
    from voxcli.chat.turn_detector import load_turn_detector

    texts = _turn_users(last)
    where = f"the last {len(texts)} user turns of chat's turn log" if texts else (
        f"{len(SAMPLE_TURNS)} sample questions (no chat turns logged yet)")
    det = load_turn_detector(threads=1, offline=offline)
    holds, took = [], []
    for text in texts or list(SAMPLE_TURNS):
        t0 = time.perf_counter()
        holds.append(det.hold_ms(text))
        took.append((time.perf_counter() - t0) * 1000)
    return tuple(holds), statistics.median(took), where


def _mode_records(mode: str, last: int = 20) -> tuple[list[dict[str, Any]], bool]:
    """The latest chat turns of this end of turn (a semantic record carries the detector's verdict), and
    whether they are tagged so; else every latest turn (records older than the tag), untagged."""
    if importlib.util.find_spec("voxcli.chat.turnlog") is None:
        return [], False
    from voxcli.chat.turnlog import read_turns

    recs = [r for r in read_turns(last=4 * last) if r.get("speech_end_ms") is not None]  # spoken, not typed
    tagged = [r for r in recs if bool(r.get("detector")) == (mode == "semantic")]
    return (tagged[-last:], True) if tagged else (recs[-last:], False)


def measure_engine(cfg: Any, budget: Any, flag: str | None = None, offline: bool | None = None) -> Measurement:
    """chat's own schedule; value = the predicted median first audio. From the terms chat's turn log measured
    when it has turns of this end of turn (`voxcli.bench.ledger_turns`), else from the budget's terms
    (`voxcli.bench.ledger_engine`)."""
    mode, src = endpoint_mode(cfg, flag)
    records, tagged = _mode_records(mode)
    if records and (tagged or mode == "semantic"):
        try:
            return _engine_from_log(budget, mode, src, records, tagged, offline)
        except ValueError:
            pass  # turns without a first audio: the budget's terms
    return _engine_from_budget(budget, mode, src, offline)


def _engine_from_log(budget: Any, mode: str, src: str, records: list[dict[str, Any]], tagged: bool,
                     offline: bool | None) -> Measurement:
    from dataclasses import replace

    from voxcli.bench.ledger import total_ms
    from voxcli.bench.ledger_knobs import NETWORKS
    from voxcli.bench.ledger_turns import Verdict, logged_terms, logged_verdicts, predict_logged
    from voxcli.chat.turn_detector import HoldPolicy

    terms, n = logged_terms(records), len(records)
    how = f"{mode} end of turn ({src}); the terms are medians of the last {n} chat turns of chat's turn log"
    if mode == "vad" and terms.endpoint_ms is not None and not (
            budget.endpoint_ms <= terms.endpoint_ms <= budget.endpoint_ms + 300):
        terms = replace(terms, endpoint_ms=budget.hold_end_ms)  # logged with another hold than the one in force
        how += f"; the endpoint: the hold in force + the measured VAD decay ({budget.hold_end_ms:.0f} ms)"
    verdicts: list[Verdict] = []
    if mode == "semantic":
        policy = HoldPolicy()
        verdicts = logged_verdicts(records, max(policy.complete_ms, policy.min_ms)) if tagged else []
        if verdicts:
            how += f"; the detector's verdicts as logged ({len(verdicts)} turns)"
        else:
            holds, det_ms, where = detector_holds(offline)
            verdicts = [Verdict(h, det_ms, h <= max(policy.complete_ms, policy.min_ms)) for h in holds]
            how += f"; the detector scored {where}"
    legs = max(0.0, budget.uplink_ms - NETWORKS["device"].uplink_ms) + budget.downlink_ms
    pred = predict_logged(terms, mode, verdicts=verdicts, tts_ms=budget.tts_first_audio_ms, extra_legs_ms=legs,
                          seed_total_ms=total_ms(budget))
    tts_how = {"audio ready": "first token -> first audio ready, before any wait for the verdict",
               "ungated turns": "first token -> first audio of the turns that did not wait for a verdict"}
    how += "; TTS first audio: " + (f"median of {n} chat turns ({tts_how.get(terms.tts_from, terms.tts_from)})"
                                    if terms.tts_ms is not None else "the term above (no turn measured it)")
    data = {**pred.to_dict(), "logged_terms": terms.to_dict()}
    return Measurement(pred.total_ms, "engine", f"{how}. {' '.join(pred.explain())}", data)


def _engine_from_budget(budget: Any, mode: str, src: str, offline: bool | None) -> Measurement:
    """chat's own schedule on the budget's terms (`voxcli.bench.ledger_engine`): no chat turns logged."""
    from voxcli.bench.ledger_engine import EngineModel, predict

    if mode == "semantic":
        holds, det_ms, where = detector_holds(offline)
        model = EngineModel("semantic", True, holds, det_ms)
        how = f"semantic end of turn ({src}); the detector scored {where}"
    else:
        model, how = EngineModel("vad", True), f"vad end of turn ({src})"
    pred = predict(budget, model)
    how += "; no chat turns of this end of turn logged: the terms above"
    return Measurement(pred.total_ms, "engine", f"{how}. {' '.join(pred.explain())}", pred.to_dict())
