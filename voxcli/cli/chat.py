"""`voxcli chat`: a spoken conversation with an LLM, every stage streaming, with barge-in.

The command only wires flags to the engine: the models of a conversation
(`voxcli.chat.models.open_chat_models`: LLM client, voice, streaming ASR, VAD,
each with its share of the cores), a speaker (the sound card, or a virtual one
writing `--output`), and `voxcli.chat.agent.Agent`. The mic is either the
microphone or `--input` files paced as if spoken.

Every setting is resolved once by `chat_settings` (flag > env > config >
default); the microphone is `devices.input` and the speaker `devices.output`
(`--device` sets both), and `asr.model` picks the ASR model like in
`transcribe`.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from voxcli.cli.complete import complete_input_device
from voxcli.cli.errors import STATE, device_hint, err, guarded
from voxcli.cli.options import (
    EndpointMsOpt,
    FinalModelOpt,
    JsonOpt,
    ModelOpt,
    OfflineOpt,
    QuietOpt,
    VerboseOpt,
    VoiceOpt,
    command_config,
    flag,
)
from voxcli.errors import UsageError

log = logging.getLogger(__name__)

HELP = """\
Talk with a language model: your speech is transcribed while you speak, the
reply is spoken while the model is still writing it, and you can interrupt it
by talking (barge-in): the speaker's echo is cancelled (WebRTC AEC3), so the
reply does not interrupt itself on laptop speakers. Each turn's latency (end
of your speech -> endpoint -> transcript -> LLM first token -> first audio)
is shown and appended to the turn log that `voxcli ledger --measured` reads.

Without --llm-url the on-device model (SmolLM2-135M-Instruct) answers; any
OpenAI-compatible server works (llama.cpp server, Ollama, vLLM, hosted APIs).
The API key is read from the environment variable named by --api-key-env and
is never printed or logged.

[bold]Examples[/bold]

  voxcli chat                                          on-device model, mic and speaker
  voxcli chat --llm-url http://127.0.0.1:8080/v1       a llama.cpp server
  voxcli chat --llm-url https://api.openai.com/v1 --llm-model gpt-4o-mini --api-key-env OPENAI_API_KEY
  voxcli chat --half-duplex                            mic closed while it speaks
  voxcli chat --no-aec                                 headphones: no echo cancelling
  voxcli chat --final-model none                       finals on --model's recognizer too (less CPU)
  voxcli chat --input q1.wav --input q2.wav --output replies.wav --json
  voxcli chat --input q1.wav --input stop.wav@1.5 -o replies.wav   interrupt the reply 1.5 s in
"""


@dataclass(frozen=True)
class ChatSettings:
    """What one conversation runs with, after flag > env > config > default."""

    url: str | None
    """OpenAI-compatible base URL; None: the on-device model."""
    llm_model: str | None
    """Model name sent to the server; None: the server's (or the on-device) default."""
    system: str | None
    """System prompt; None: none."""
    voice: str | None
    """TTS voice (config tts.voice); None: the catalog's default."""
    asr_model: str | None
    """ASR model name (config asr.model); None: the fast tier (`asr.models.chat_asr`)."""
    endpoint_ms: float
    """Silence that ends the user's turn (config asr.endpoint_ms)."""
    endpoint: str
    """End of turn: "vad" (the silence hold) or "semantic" (config asr.endpoint)."""
    barge_in_ms: float
    """Speech needed to interrupt the reply (config chat.barge_in_ms)."""
    mic_device: str | None
    """Microphone (config devices.input); None: the system default."""
    speaker_device: str | None
    """Speaker (config devices.output); None: the system default."""
    flush_ms: float = 1500.0
    """Reply text stalled this long without a boundary is spoken (config tts.max_buffer_flush_ms; 0 = off)."""
    final_asr: str | None = None
    """The finals' recognizer as configured (config chat.final_asr); None: chosen (`asr.models.chat_final_asr`)."""


def chat_settings(*, llm_url: str | None = None, llm_model: str | None = None, system: str | None = None,
                  voice: str | None = None, model: str | None = None, endpoint_ms: float | None = None,
                  barge_in_ms: float | None = None, device: str | None = None,
                  endpoint: str | None = None, final_model: str | None = None) -> ChatSettings:
    """Lay the flags (None = not given) over env, config and the defaults table.

    `--device` names one device for both directions (a headset, a PulseAudio
    sink); without it the mic and the speaker come from their own keys.
    """
    from voxcli.config import resolve

    cfg = command_config()
    given = {
        "url": ("chat.llm_url", llm_url), "llm_model": ("chat.llm_model", llm_model),
        "system": ("chat.system", system), "voice": ("tts.voice", voice), "asr_model": ("asr.model", model),
        "endpoint_ms": ("asr.endpoint_ms", endpoint_ms), "barge_in_ms": ("chat.barge_in_ms", barge_in_ms),
        "endpoint": ("asr.endpoint", endpoint), "flush_ms": ("tts.max_buffer_flush_ms", None),
        "mic_device": ("devices.input", device), "speaker_device": ("devices.output", device),
        "final_asr": ("chat.final_asr", final_model),
    }
    values = {name: resolve(key, flag_value, config=cfg) for name, (key, flag_value) in given.items()}
    for name in ("endpoint_ms", "barge_in_ms", "flush_ms"):
        values[name] = float(values[name])
    if values["endpoint"] not in ("vad", "semantic"):
        raise UsageError(f"asr.endpoint must be vad or semantic, not {values['endpoint']!r}")
    return ChatSettings(**values)


@guarded
def chat(
    llm_url: Annotated[Optional[str], typer.Option("--llm-url", show_default=False, help="Base URL of an OpenAI-compatible server (…/v1); default: config [chat] llm_url, else the on-device model.")] = None,
    llm: Annotated[Optional[str], typer.Option("--llm", show_default=False, help="'local' for the on-device model (same as no --llm-url), or a URL.")] = None,
    llm_model: Annotated[Optional[str], typer.Option("--llm-model", show_default=False, help="Model name sent to the server (or the local model's name); default: config [chat] llm_model.")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", metavar="VAR", help="Environment variable holding the API key.")] = None,
    system: Annotated[Optional[str], typer.Option("--system", show_default=False, help="System prompt (default: config [chat] system).")] = None,
    endpoint_ms: EndpointMsOpt = None,
    endpoint: Annotated[Optional[str], typer.Option("--endpoint", metavar="vad|semantic", show_default=False, help="End of turn: 'vad' waits --endpoint-ms of silence; 'semantic' asks the on-device SmolLM2 whether the words so far are a complete thought (short hold) or not (longer hold). Default: config asr.endpoint, else vad.")] = None,
    barge_in_ms: Annotated[Optional[int], typer.Option("--barge-in-ms", min=0, max=5000, show_default=False, help="Speech needed to interrupt the reply, in ms (default: config [chat] barge_in_ms, else 300).")] = None,
    half_duplex: Annotated[bool, flag("--half-duplex", help="Close the mic while the assistant speaks (no echo cancellation).")] = False,
    no_aec: Annotated[bool, flag("--no-aec", help="Keep the mic open while the assistant speaks but do not cancel its echo (headphones); by default the speaker's echo is cancelled (WebRTC AEC3).")] = False,
    ns: Annotated[bool, flag("--ns", help="With echo cancellation: WebRTC noise suppression on the microphone.")] = False,
    agc: Annotated[bool, flag("--agc", help="With echo cancellation: WebRTC automatic gain control on the microphone.")] = False,
    device: Annotated[Optional[str], typer.Option("--device", "-d", show_default=False, autocompletion=complete_input_device, help="Microphone and speaker: device index or name part (default: config devices.input for the mic, devices.output for the speaker; see `voxcli devices`).")] = None,
    model: ModelOpt = None,
    final_model: FinalModelOpt = None,
    input_: Annotated[Optional[list[str]], typer.Option("--input", "-i", metavar="FILE[@T]", help="Speak this file instead of the mic (repeatable); FILE@T starts T s into the previous reply.")] = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", show_default=False, help="With --input: write what the assistant said (as heard) to this WAV/FLAC.")] = None,
    voice: VoiceOpt = None,
    max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", min=1, show_default=False, help="Cap on the reply length in tokens (default: 256 on-device; for a server, the server's own limit, and voxcli stops reading at 4096). Without a usage count from the server, tokens are counted as characters / 4.")] = None,
    first_token_timeout: Annotated[float, typer.Option("--first-token-timeout", min=0.1, help="Seconds to wait for the LLM's first token.")] = 60.0,
    progress_timeout: Annotated[float, typer.Option("--progress-timeout", min=0.1, help="After the first token: seconds without new text before the answer is cut off (keep-alive bytes do not count).")] = 20.0,  # = voxcli.llm.openai_compat.LLMTimeouts().progress (not imported: httpx at startup)
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    no_log: Annotated[bool, flag("--no-log", help="Do not append turns to the turn log.")] = False,
    verbose: VerboseOpt = False,
    offline: OfflineOpt = False,
) -> None:
    """A spoken conversation with an LLM (the `voxcli chat` command)."""
    if llm and llm_url and llm != llm_url:
        raise UsageError("give either --llm or --llm-url, not both")
    if half_duplex and no_aec:
        raise UsageError("give either --half-duplex or --no-aec, not both")
    if output is not None and not input_:
        raise UsageError("--output needs --input (with the microphone, replies go to the speaker)")
    if output is not None:
        from voxcli.audio.files import check_output_path

        check_output_path(output)  # a directory in the way, or no directory, fails before four models load
    settings = chat_settings(llm_url=llm_url or llm, llm_model=llm_model, system=system, voice=voice, model=model,
                             endpoint_ms=endpoint_ms, barge_in_ms=barge_in_ms, device=device, endpoint=endpoint,
                             final_model=final_model)
    inputs = _read_inputs(input_ or [])
    if not inputs:
        from voxcli.audio.devices import list_devices

        with device_hint("chat"):
            list_devices()  # no PortAudio: say so before loading four models
    aec = None if inputs else _echo_canceller(half_duplex=half_duplex, no_aec=no_aec, ns=ns, agc=agc, quiet=quiet)
    half_duplex = half_duplex or (not inputs and not no_aec and aec is None)
    _run(settings, api_key_env=api_key_env, half_duplex=half_duplex, aec=aec, inputs=inputs, output=output,
         max_tokens=max_tokens, first_token_timeout=first_token_timeout, progress_timeout=progress_timeout,
         json_lines=json_out, quiet=quiet, log_turns=not no_log)


def _read_inputs(specs: list[str]) -> list[tuple[Any, Any]]:
    """Parse and check every --input's header now (before four models load); the audio is decoded per turn."""
    from voxcli.audio.files import audio_info
    from voxcli.chat.scripted_mic import ScriptedInput

    out = []
    for spec in specs:
        item = ScriptedInput.parse(spec)
        if audio_info(item.path).frames == 0:
            raise UsageError(f"--input {item.path}: no audio")
        out.append((item, item.path))
    return out


def _echo_canceller(*, half_duplex: bool, no_aec: bool, ns: bool, agc: bool, quiet: bool) -> Any:
    """The AEC settings for a conversation through the speaker, or None (half-duplex, --no-aec, unavailable).

    Where the package cannot load, one warning line, and the caller closes the mic while
    the assistant speaks (half-duplex) rather than let the reply interrupt itself.
    """
    if half_duplex or no_aec:
        return None
    from voxcli.audio import aec

    why = aec.unavailable()
    if why is not None:
        if not quiet:
            err(f"voxcli: warning: {why}; half-duplex (mic closed while the assistant speaks)")
        return None
    return aec.AECConfig(ns=ns, agc=agc)


def _open_devices(settings: ChatSettings, rate: int, aec: Any = None) -> tuple[Any, Any]:
    """The microphone (devices.input) and the speaker (devices.output), with chat's hint if one fails.

    With `aec` (an `AECConfig`), the speaker's output callback feeds the canceller's reference
    and the microphone's blocks come out with the echo removed (`voxcli.audio.aec`).
    """
    from voxcli.audio.devices import MicCapture
    from voxcli.audio.virtual import DeviceSpeaker

    canceller = None
    if aec is not None:
        from voxcli.audio.aec import EchoCanceller

        canceller = EchoCanceller(16000, aec)
    with device_hint("chat"):
        mic = MicCapture(16000, _device(settings.mic_device))
        try:
            speaker = DeviceSpeaker(rate, _device(settings.speaker_device),
                                    on_played=canceller.reference.tap if canceller is not None else None)
        except BaseException:
            mic.close()
            raise
    if canceller is not None:
        from voxcli.audio.aec import CancelledMic

        mic = CancelledMic(mic, canceller)
    return mic, speaker


def _run(settings: ChatSettings, *, api_key_env: str | None, half_duplex: bool, aec: Any, inputs: list[tuple[Any, Any]],
         output: Path | None, max_tokens: int | None, first_token_timeout: float, progress_timeout: float,
         json_lines: bool, quiet: bool, log_turns: bool) -> None:
    from voxcli.asr.models import chat_asr, chat_final_asr
    from voxcli.audio.virtual import VirtualSpeaker
    from voxcli.chat.agent import Agent, AgentConfig
    from voxcli.chat.models import open_chat_models
    from voxcli.cli.views.chat import chat_view

    final_asr = chat_final_asr(settings.final_asr, chat_asr(settings.asr_model))
    models = open_chat_models(
        url=settings.url, llm_model=settings.llm_model, api_key_env=api_key_env, max_tokens=max_tokens,
        first_token_timeout=first_token_timeout, progress_timeout=progress_timeout,
        voice=settings.voice, asr_model=settings.asr_model, final_asr=final_asr,
        final_optional=settings.final_asr is None,
        endpoint_ms=settings.endpoint_ms, endpoint=settings.endpoint, offline=STATE.offline or None,
    )
    if final_asr and models.asr.final_model is None:  # chosen here, not configured: chat goes on with one
        err(f"voxcli: warning: {final_asr} did not load (--verbose says why); finals on {chat_asr(settings.asr_model)}")
    log.info("finals decoded by %s", getattr(models.asr.final_model, "name", None) or "the same recognizer")
    b = models.budget
    log.info("threads per model: TTS %d, ASR %d, VAD %d, LLM %d", b.tts, b.asr, b.vad, b.llm)
    client, rate = models.llm, models.voice.sample_rate
    mic = writer = None
    if inputs:
        # With -o the replies are written as they are heard (silences included), never held whole.
        writer = _writer(output, rate) if output is not None else None
        speaker: Any = VirtualSpeaker(rate, keep=False, sink=writer.write if writer is not None else None)
    else:
        mic, speaker = _open_devices(settings, rate, aec)
    view = chat_view(json_lines=json_lines, quiet=quiet)
    try:
        agent = Agent(
            client, models.asr, models.vad,
            functools.partial(models.open_reply_stream, max_buffer_flush_ms=settings.flush_ms), speaker,
            AgentConfig(system=settings.system, barge_in_ms=settings.barge_in_ms, half_duplex=half_duplex,
                        endpoint_ms=settings.endpoint_ms, log_turns=log_turns),
            on_event=view, turn_detector=models.turn_detector,
        )
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if getattr(mic, "canceller", None) is not None:  # the user over the reply pauses it at once (voxcli.audio.doubletalk)
        agent.hear_double_talk(mic.canceller)
    if not quiet:
        err(f"voxcli: chat with {getattr(client, 'name', 'the on-device model')}"
            + ("" if inputs else " — speak; Ctrl-C to end"))
    try:
        agent.start()
        _converse(agent, mic, inputs)
        if writer is not None:
            speaker.flush()
            writer.commit()
            writer = None
        if json_lines and hasattr(view, "emit"):
            view.emit({"event": "history", "messages": agent.history.messages})
    finally:
        if writer is not None:
            writer.abort()  # failure or Ctrl-C: no half-written replies file
        agent.close()
        if mic is not None:
            mic.close()
            if getattr(mic, "canceller", None) is not None:
                log.info("%s", mic.canceller.report())
        getattr(speaker, "close", lambda: None)()
        getattr(client, "close", lambda: None)()
        view.close()


def _converse(agent: Any, mic: Any, inputs: list[tuple[Any, Any]]) -> None:
    """Feed the agent the scripted inputs (then wait for the last reply) or the microphone until Ctrl-C."""
    if inputs:
        from voxcli.chat.scripted_mic import run_script

        run_script(agent, inputs)
        agent.finish(timeout=30.0)
    else:
        for block in mic:
            agent.feed(block)
            if agent.error is not None:
                break
    if agent.error is not None:
        raise agent.error


def _device(device: str | None) -> int | str | None:
    if device is None:
        return None
    return int(device) if device.isdigit() else device


def _writer(path: Path, rate: int) -> Any:
    from voxcli.audio.files import AtomicAudioWriter

    return AtomicAudioWriter(path, rate)


def register(app: typer.Typer) -> None:
    app.command("chat", help=HELP, no_args_is_help=False)(chat)
