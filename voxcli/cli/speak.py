"""`voxcli speak`: text (argument or a live pipe) to the speaker, a file or raw PCM.

The command only wires the engine's `TTSStreamer` to sinks and a view: stdin
is read as bytes arrive (os.read + incremental UTF-8), so `some-llm | voxcli
speak -` starts talking after the first clause; audio goes to exactly the
outputs asked for; every failure path cancels the stream, silences the
speaker at once and leaves no half-written file.
"""
from __future__ import annotations

import codecs
import os
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any, Iterator, Optional

import numpy as np
import typer

from voxcli.cli.errors import STATE, device_hint, guarded, writing_stdout
from voxcli.cli.options import (JsonOpt, OfflineOpt, OutputDeviceOpt, OutputFileOpt,
                                QuietOpt, VerboseOpt, VoiceOpt, command_config, flag)
from voxcli.cli.tts_knobs import (FirstFramesOpt, FramesOpt, LookaheadOpt, LookbackOpt, OverlapOpt,
                                  resolve_knobs, stream_knobs)
from voxcli.cli.corpus_run import BatchArgs, ForceOpt, JobsOpt, RayOpt, show_batch
from voxcli.cli.speak_words import SentText, check_subtitles, pick_view, write_subtitles
from voxcli.audio.pcm import check_rate
from voxcli.errors import UsageError
from voxcli.events import AudioChunk, StreamStats

HELP = """\
Speak text with the lowest time-to-first-audio: synthesis streams sentence by
sentence (and block by block inside a sentence) while later text is still
arriving. Text comes from the argument, or from stdin with `-` (read as it
arrives). Audio goes to the speaker unless -o or --raw is given. A live view
(the text, the word being heard highlighted; --table, -o or --raw: the chunk
table) and a summary (TTFA, RTF) go to stderr; --json prints chunk and word events
as JSON lines instead (on stdout, or stderr with --raw). Word times come from
the voice's own phoneme durations; --subtitles writes them as SRT or WebVTT cues.

[bold]Examples[/bold]

  voxcli speak "Hello there. This is voxcli, speaking while it thinks."
  voxcli speak "Hello." -o hello.wav            write a .wav or .flac file
  voxcli speak "Hello." --raw | aplay -r 22050 -f S16_LE -c 1
  voxcli speak "Hi." --raw --format f32le --rate 16000 > hi.f32
  some-llm | voxcli speak -                     speak while text streams in
  voxcli speak --no-stream "Compare."           synthesize everything first
  voxcli speak "Hi." --json -o hi.wav           chunk and word events as JSON lines
  voxcli speak "Hi there." -o hi.wav --subtitles hi.vtt    subtitles timed to the audio
  voxcli speak --from lines.txt --out-dir ds    a TTS data set (LJSpeech layout)
"""

FORMATS = ("s16le", "f32le")


def _stdin_pieces() -> Iterator[str]:
    """Text from stdin as soon as bytes arrive (not line by line); UTF-8 split safely across reads."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    try:
        fd: int | None = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    if fd is not None:
        while data := os.read(fd, 65536):
            if text := decoder.decode(data):
                yield text
    else:  # an in-memory stdin (tests, embedding)
        buf = getattr(sys.stdin, "buffer", None)
        while data := (buf.read1(65536) if buf is not None and hasattr(buf, "read1") else sys.stdin.read(65536)):
            text = decoder.decode(data) if isinstance(data, bytes) else data
            if text:
                yield text
    if tail := decoder.decode(b"", final=True):
        yield tail


class _Outputs:
    """Where the audio goes: speaker, atomic file and/or raw PCM on stdout."""

    def __init__(self, sample_rate: int, *, output: Path | None, raw: bool, fmt: str, rate: int | None,
                 device: str | None) -> None:
        from voxcli.audio.pcm import StreamResampler

        self.sample_rate = sample_rate
        self.player: Any = None
        self.writer: Any = None
        self.raw = sys.stdout.buffer if raw else None
        self.fmt = fmt
        out_rate = rate or sample_rate
        self._raw_rs = StreamResampler(sample_rate, out_rate) if raw else None
        self._file_rs = StreamResampler(sample_rate, out_rate) if output else None
        if output is not None:
            from voxcli.audio.files import AtomicAudioWriter

            self.writer = AtomicAudioWriter(output, out_rate)
        if not raw and output is None:
            from voxcli.audio.player import Player

            self.player = Player(sample_rate, device)

    def write(self, audio: np.ndarray, last: bool = False) -> None:
        if self.raw is not None and self._raw_rs is not None:
            from voxcli.audio.pcm import encode_pcm

            data = encode_pcm(self._raw_rs.process(audio, last=last), self.fmt)
            if data:
                with writing_stdout():  # `--raw > /dev/full`: one line and exit 1
                    self.raw.write(data)
                    self.raw.flush()
        if self.writer is not None and self._file_rs is not None:
            out = self._file_rs.process(audio, last=last)
            if out.size:
                self.writer.write(out)
        if self.player is not None and audio.size:
            self.player.write(audio)

    def finish(self) -> None:
        """Success: flush resamplers, commit the file, let the speaker play out."""
        self.write(np.zeros(0, np.float32), last=True)
        if self.writer is not None:
            self.writer.commit()
        if self.player is not None:
            self.player.drain()
            self.player.close()

    def abort(self) -> None:
        """Failure or Ctrl-C: silence now, remove the temp file."""
        if self.player is not None:
            self.player.abort()
        if self.writer is not None:
            self.writer.abort()


def _no_stream(voice: Any, text: str) -> list[AudioChunk]:
    """Synthesize everything first (the comparison baseline): one chunk, then the final sentinel."""
    from voxcli.tts.words import synthesize

    t0 = time.perf_counter()
    audio, words = synthesize(voice, text)
    dt = time.perf_counter() - t0
    sr = voice.sample_rate
    audio_s = audio.size / sr
    stats = StreamStats(ttfa_s=dt if audio.size else None, rtf=dt / audio_s if audio_s else 0.0, audio_s=audio_s,
                        total_s=dt, chunks=1 if audio.size else 0, underruns=0)
    chunks = [AudioChunk(audio, sr, 0, text=text, t_emit=dt, synth_s=dt, words=tuple(words))] if audio.size else []
    return chunks + [AudioChunk(np.zeros(0, np.float32), sr, len(chunks), is_final=True, kind="final",
                                t_emit=dt, stats=stats)]


def _feed_stdin(streamer: Any, errors: list[BaseException], sent: SentText) -> None:
    """Send stdin to the streamer; `send` blocks while enough text waits, so endless input stays flat in memory."""
    try:
        for piece in _stdin_pieces():
            sent.add(piece)
            streamer.send(piece, block=True)
    except BaseException as e:  # noqa: BLE001 - re-raised by the main thread
        errors.append(e)
    finally:
        streamer.finish()


def _check_args(text: str | None, output: Path | None, fmt: str, rate: int | None) -> bool:
    """Validate the arguments before any model loads; True when the text comes from stdin."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown --format {fmt!r} (choose s16le or f32le)")
    if rate is not None:
        check_rate(rate, "--rate")
    if output is not None:
        from voxcli.audio.files import check_output_path

        if output.suffix.lower() not in (".wav", ".flac"):
            raise UsageError(f"cannot write {output}: use a .wav or .flac file name")
        check_output_path(output)  # a directory in the way fails now, not after the voice loaded
    from_stdin = text == "-" or (text is None and not sys.stdin.isatty())
    if text is None and not from_stdin:
        raise UsageError("no text to speak", hint='voxcli speak "Hello." or: echo Hello. | voxcli speak -')
    if not from_stdin and not (text or "").strip():
        raise UsageError("no text to speak: the text is empty or only whitespace")
    return from_stdin


def _chunks(voice: Any, text: str | None, from_stdin: bool, stream: bool, sent: SentText,
            flush_ms: float | None = None, knobs: Any = None) -> tuple[Any, Any, list[BaseException]]:
    """(chunk iterator, streamer or None, errors of the stdin feeder); the text sent goes to `sent`."""
    errors: list[BaseException] = []
    if not stream:
        full = "".join(_stdin_pieces()) if from_stdin else str(text)
        if not full.strip():
            raise UsageError("no text to speak: the input is empty or only whitespace")
        sent.add(full)
        return iter(_no_stream(voice, full)), None, errors
    streamer = voice.open_stream(knobs, max_buffer_flush_ms=flush_ms)
    if from_stdin:
        threading.Thread(target=_feed_stdin, args=(streamer, errors, sent), daemon=True,
                         name="voxcli-stdin").start()
    else:
        sent.add(str(text))
        streamer.send(str(text), final=True)  # known up front: whole sentences (issue 15)
    return streamer.output, streamer, errors


@guarded
def speak(
    text: Annotated[Optional[str], typer.Argument(help="Text to speak; `-` (or no argument with a pipe) reads stdin.")] = None,
    output: OutputFileOpt = None,
    raw: Annotated[bool, flag("--raw", help="Write raw PCM to stdout (nothing else goes to stdout).")] = False,
    fmt: Annotated[str, typer.Option("--format", help="Raw PCM sample format: s16le or f32le.")] = "s16le",
    rate: Annotated[Optional[int], typer.Option("--rate", help="Resample the output to this rate in Hz (default: the voice's, 22050).", show_default=False)] = None,
    voice: VoiceOpt = None,
    device: OutputDeviceOpt = None,
    stream: Annotated[bool, flag("--stream/--no-stream", help="Stream (default), or synthesize all text before playing (for comparison).")] = True,
    max_buffer_flush_ms: Annotated[Optional[float], typer.Option(
        "--max-buffer-flush-ms", min=0, show_default=False,
        help="Speak text that waited this long (ms) without a sentence or clause boundary, "
             "e.g. an LLM that stalls mid-clause; 0 = only at boundaries "
             "(default: config tts.max_buffer_flush_ms, 1500).")] = None,
    subtitles: Annotated[Optional[Path], typer.Option(
        "--subtitles", help="Also write subtitles timed to the audio: a .srt or .vtt file (atomically).",
        show_default=False)] = None,
    table: Annotated[bool, flag("--table", help="Show the live chunk table instead of the highlighted text.")] = False,
    from_list: Annotated[Optional[str], typer.Option("--from", help="A data set: speak each line of this file (- for stdin) into --out-dir.", show_default=False)] = None,
    out_dir: Annotated[Optional[Path], typer.Option("--out-dir", help="With --from: wavs/<id>.wav per line + metadata.csv (LJSpeech), resumable.", show_default=False)] = None,
    prefix: Annotated[str, typer.Option("--prefix", help="With --from: utterance ids are PREFIX-00001, ...")] = "line",
    jobs: JobsOpt = None,
    ray: RayOpt = None,
    force: ForceOpt = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    offline: OfflineOpt = False,
    first_frames: FirstFramesOpt = None,
    frames: FramesOpt = None,
    lookback: LookbackOpt = None,
    lookahead: LookaheadOpt = None,
    overlap: OverlapOpt = None,
) -> None:
    """Speak text (the `voxcli speak` command)."""
    if from_list is not None or out_dir is not None:
        _dataset(text, from_list, out_dir, prefix, BatchArgs("wav", voice, 0, jobs, ray, False, force), json_out, quiet)
        return
    if jobs is not None or ray is not None or force:
        raise UsageError("--jobs, --ray and --force apply to --from/--out-dir data sets")
    fmt = fmt.lower()
    from_stdin = _check_args(text, output, fmt, rate)
    check_subtitles(subtitles)

    from voxcli.config import resolve
    from voxcli.tts.streamer import load_voice

    cfg = command_config()
    voice_name = resolve("tts.voice", voice, config=cfg)
    flush_ms = resolve("tts.max_buffer_flush_ms", max_buffer_flush_ms, config=cfg)
    device = resolve("devices.output", device, config=cfg)
    knob_values = resolve_knobs(cfg, first_frames=first_frames, frames=frames, lookback=lookback,
                                lookahead=lookahead, overlap=overlap)
    tts = load_voice(voice_name, offline=STATE.offline or None)
    knobs = stream_knobs(tts, knob_values) if stream else None
    with device_hint("speak"):
        outputs = _Outputs(tts.sample_rate, output=output, raw=raw, fmt=fmt, rate=rate, device=device)
    json_stream = sys.stderr if raw else sys.stdout
    sent = SentText(keep=not from_stdin or subtitles is not None)
    view = pick_view(outputs.player, sent, quiet, json_out, table or verbose)
    streamer = None
    words: list[Any] = []
    try:
        chunks, streamer, errors = _chunks(tts, text, from_stdin, stream, sent, flush_ms, knobs)
        last: AudioChunk | None = None
        for chunk in chunks:
            if json_out:
                with writing_stdout():
                    print(chunk.to_json(), file=json_stream, flush=True)
                    for w in chunk.words:
                        print(w.to_json(), file=json_stream, flush=True)
            if subtitles is not None:
                words.extend(chunk.words)
            if chunk.kind != "audio":
                last = chunk
                break
            with device_hint("speak"):
                outputs.write(chunk.audio)
            if view is not None:
                view.add(chunk)
        if streamer is not None:
            if errors:
                raise errors[0]
            if streamer.spoken_chars == 0:
                raise UsageError("no text to speak: the input is empty, whitespace or has nothing speakable")
        outputs.finish()
        if subtitles is not None:
            write_subtitles(subtitles, words, sent.text())
        if view is not None:
            from voxcli.cli.views.tts import summary_line

            view.finish(summary_line(last.stats, mode="stream" if stream else "no-stream")
                        if last is not None and last.stats is not None else "done")
    except BaseException:
        outputs.abort()  # silence first, then wait for the producer's current model call
        if streamer is not None:
            streamer.close()
        if view is not None:
            view.close()
        raise


def _dataset(text: Optional[str], from_list: Optional[str], out_dir: Optional[Path], prefix: str, a: BatchArgs,
             json_out: bool, quiet: bool) -> None:
    """`speak --from lines.txt --out-dir DIR`: one WAV per line and metadata.csv, through the corpus batch."""
    from voxcli.config import resolve
    from voxcli.corpus.tts_job import speak_events

    if from_list is None or out_dir is None:
        raise UsageError("a data set needs both --from LINES and --out-dir DIR")
    if text is not None:
        raise UsageError("give the text either as an argument or with --from, not both")
    try:
        raw = sys.stdin.read() if from_list == "-" else Path(from_list).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{from_list}: cannot read the lines ({getattr(e, 'strerror', None) or e})") from None
    lines = [s for line in raw.splitlines() if (s := line.strip())]
    voice = resolve("tts.voice", a.model, config=command_config())
    events = speak_events(lines, out_dir, voice=voice, jobs=a.jobs, ray=a.ray, prefix=prefix, force=a.force,
                          offline=STATE.offline or None)
    show_batch(events, out_dir, json_out, quiet)


def register(app: typer.Typer) -> None:
    app.command("speak", help=HELP, no_args_is_help=False)(speak)
