"""`voxcli chat`: a spoken conversation with an LLM, every stage streaming, with barge-in.

The command only wires flags to the engine: an LLM client (`voxcli.llm.open_llm`),
the streaming ASR, a TTS streamer per reply, a speaker (the sound card, or a
virtual one writing `--output`), and `voxcli.chat.agent.Agent`. The mic is
either the microphone or `--input` files paced as if spoken.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from voxcli.cli.errors import STATE, err, guarded
from voxcli.cli.complete import complete_output_device, complete_tts_model
from voxcli.errors import UsageError

HELP = """\
Talk with a language model: your speech is transcribed while you speak, the
reply is spoken while the model is still writing it, and you can interrupt it
by talking (barge-in). Each turn's latency (end of your speech -> endpoint ->
transcript -> LLM first token -> first audio) is shown and appended to the
turn log that `voxcli ledger --measured` reads.

Without --llm-url the on-device model (SmolLM2-135M-Instruct) answers; any
OpenAI-compatible server works (llama.cpp server, Ollama, vLLM, hosted APIs).
The API key is read from the environment variable named by --api-key-env and
is never printed or logged.

[bold]Examples[/bold]

  voxcli chat                                          on-device model, mic and speaker
  voxcli chat --llm-url http://127.0.0.1:8080/v1       a llama.cpp server
  voxcli chat --llm-url https://api.openai.com/v1 --llm-model gpt-4o-mini --api-key-env OPENAI_API_KEY
  voxcli chat --half-duplex                            no echo cancellation: mic closed while speaking
  voxcli chat --input q1.wav --input q2.wav --output replies.wav --json
  voxcli chat --input q1.wav --input stop.wav@1.5 -o replies.wav   interrupt the reply 1.5 s in
"""


def register(app: typer.Typer) -> None:
    @app.command("chat", help=HELP, no_args_is_help=False)
    @guarded
    def chat(
        llm_url: Annotated[Optional[str], typer.Option("--llm-url", help="Base URL of an OpenAI-compatible server (…/v1); default: config [chat] llm_url, else the on-device model.")] = None,
        llm: Annotated[Optional[str], typer.Option("--llm", help="'local' for the on-device model (same as no --llm-url), or a URL.")] = None,
        llm_model: Annotated[Optional[str], typer.Option("--llm-model", help="Model name sent to the server (or the local model's name).")] = None,
        api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", metavar="VAR", help="Environment variable holding the API key.")] = None,
        system: Annotated[Optional[str], typer.Option("--system", help="System prompt.")] = None,
        endpoint_ms: Annotated[Optional[int], typer.Option("--endpoint-ms", min=100, max=5000, help="Silence that ends your turn (VAD hold) (default: 500).")] = None,
        barge_in_ms: Annotated[Optional[int], typer.Option("--barge-in-ms", min=0, max=5000, help="Speech needed to interrupt the reply (default: 300).")] = None,
        half_duplex: Annotated[bool, typer.Option("--half-duplex", help="Close the mic while the assistant speaks (no echo cancellation).")] = False,
        device: Annotated[Optional[str], typer.Option("--device", help="Audio device index or name substring (see `voxcli devices`).", autocompletion=complete_output_device)] = None,
        input_: Annotated[Optional[list[str]], typer.Option("--input", "-i", metavar="FILE[@T]", help="Speak this file instead of the mic (repeatable); FILE@T starts T s into the previous reply.")] = None,
        output: Annotated[Optional[Path], typer.Option("--output", "-o", help="With --input: write what the assistant said (as heard) to this WAV/FLAC.")] = None,
        voice: Annotated[Optional[str], typer.Option("--voice", help="TTS voice name.", autocompletion=complete_tts_model)] = None,
        max_tokens: Annotated[Optional[int], typer.Option("--max-tokens", min=1, help="Cap on the reply length in tokens (default: 256).")] = None,
        first_token_timeout: Annotated[float, typer.Option("--first-token-timeout", min=0.1, help="Seconds to wait for the LLM's first token.")] = 60.0,
        json_: Annotated[bool, typer.Option("--json", help="JSON lines of every event (captions, spoken text, turns) on stdout.")] = False,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No display on stderr.")] = False,
        no_log: Annotated[bool, typer.Option("--no-log", help="Do not append turns to the turn log.")] = False,
    ) -> None:
        from voxcli.config import load_config

        cfg = load_config()
        for w in cfg.warnings:
            err(f"voxcli: warning: {w}")
        if llm and llm_url and llm != llm_url:
            raise UsageError("give either --llm or --llm-url, not both")
        url = llm_url or llm or cfg.chat.llm_url
        if output is not None and not input_:
            raise UsageError("--output needs --input (with the microphone, replies go to the speaker)")
        if output is not None and not output.parent.exists():
            raise UsageError(f"--output {output}: directory {output.parent} does not exist")
        inputs = _read_inputs(input_ or [])
        _run(
            url=url, model=llm_model or cfg.chat.llm_model, api_key_env=api_key_env,
            system=system if system is not None else cfg.chat.system,
            endpoint_ms=endpoint_ms or cfg.asr.endpoint_ms or 500,
            barge_in_ms=barge_in_ms if barge_in_ms is not None else int(cfg.chat.barge_in_ms or 300),
            half_duplex=half_duplex, device=device or cfg.devices.output, inputs=inputs, output=output,
            voice=voice or cfg.tts.voice, max_tokens=max_tokens, first_token_timeout=first_token_timeout,
            json_lines=json_, quiet=quiet, log_turns=not no_log,
        )


def _read_inputs(specs: list[str]) -> list:
    from voxcli.audio.files import read_audio
    from voxcli.chat.scripted_mic import ScriptedInput

    out = []
    for spec in specs:
        item = ScriptedInput.parse(spec)
        audio, _ = read_audio(item.path, 16000)
        if audio.size == 0:
            raise UsageError(f"--input {item.path}: no audio")
        out.append((item, audio))
    return out


def _run(*, url, model, api_key_env, system, endpoint_ms, barge_in_ms, half_duplex, device, inputs, output,
         voice, max_tokens, first_token_timeout, json_lines, quiet, log_turns) -> None:
    from voxcli.audio.virtual import DeviceSpeaker, VirtualSpeaker
    from voxcli.cli.views.chat import chat_view
    from voxcli.chat.agent import Agent, AgentConfig
    from voxcli.asr.streamer import open_asr_streamer
    from voxcli.tts.streamer import load_voice
    from voxcli.asr.endpointer import SileroVAD
    from voxcli.llm import open_llm
    from voxcli.hub.registry import resolve_model

    offline = STATE.offline or None
    client = open_llm(url, model, api_key_env=api_key_env, max_tokens=max_tokens,
                      first_token_timeout=first_token_timeout)
    voice_obj = load_voice(voice, offline=offline)
    vad = SileroVAD.load(resolve_model("silero-vad", kind="vad", offline=offline).file("silero_vad.onnx"))
    asr = open_asr_streamer(endpoint_ms=endpoint_ms, offline=offline)
    mic = None
    if inputs:
        speaker = VirtualSpeaker(voice_obj.sample_rate, keep=output is not None)
    else:
        from voxcli.audio.devices import MicCapture

        speaker = DeviceSpeaker(voice_obj.sample_rate, _device(device))
        mic = MicCapture(16000, _device(device))
    view = chat_view(json_lines=json_lines, quiet=quiet)
    agent = Agent(
        client, asr, vad, voice_obj.open_stream, speaker,
        AgentConfig(system=system, barge_in_ms=barge_in_ms, half_duplex=half_duplex, endpoint_ms=endpoint_ms,
                    log_turns=log_turns),
        on_event=view,
    )
    if not quiet:
        err(f"voxcli: chat with {getattr(client, 'name', 'the on-device model')}"
            + ("" if inputs else " — speak; Ctrl-C to end"))
    try:
        agent.start()
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
        if output is not None:
            _write(output, speaker.timeline(), voice_obj.sample_rate)
        if json_lines and hasattr(view, "emit"):
            view.emit({"event": "history", "messages": agent.history})
    finally:
        agent.close()
        if mic is not None:
            mic.close()
        getattr(speaker, "close", lambda: None)()
        getattr(client, "close", lambda: None)()
        view.close()


def _device(device: str | None) -> int | str | None:
    if device is None:
        return None
    return int(device) if device.isdigit() else device


def _write(path: Path, audio, rate: int) -> None:
    from voxcli.audio.files import AtomicAudioWriter

    with AtomicAudioWriter(path, rate) as w:
        w.write(audio)
