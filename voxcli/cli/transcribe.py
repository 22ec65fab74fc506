"""`voxcli transcribe`: speech to text from a file, stdin PCM or the microphone.

FILE alone takes the fast offline path (VAD segments, one decode each).
`--live`, `-` and piped stdin go through the streaming engine, shown live on
stderr; stdout only ever carries committed text (one line per utterance) or,
with `--json`, JSON lines of every caption and a final stats record.
"""
from __future__ import annotations

import functools
import io
import os
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Callable, Iterable, Iterator, List, Optional

import numpy as np
import typer

from voxcli.cli.errors import STATE, device_hint, err, guarded, writing_stdout
from voxcli.cli.options import (AgreementOpt, EndpointMsOpt, InputDeviceOpt, JsonOpt, ModelOpt, OfflineOpt,
                                QuietOpt, SpeedOpt, StepMsOpt, VerboseOpt, command_config, flag)
from voxcli.audio.pcm import MAX_RATE, MIN_RATE
from voxcli.cli.corpus_run import BatchArgs, ForceOpt, JobsOpt, RayOpt, ShipAudioOpt, run_corpus
from voxcli.errors import UsageError

SR = 16000
CHUNK_S = 0.1

HELP = """\
Transcribe speech: a file, raw PCM on stdin, or the microphone (live captions).

FILE alone is transcribed offline (fast, VAD-segmented). With --live the file
is streamed at real time (--speed 4 for 4x, --speed 0 unpaced) through the
same engine as the microphone. Without FILE, --live listens to the mic.
`-` (or piped stdin) reads raw PCM as it arrives (--rate, --format).
Live captions go to stderr (stable words normal, tentative words grey);
stdout gets the committed text, one line per utterance (with --json: JSON
lines, one per caption, then a stats record).

Many inputs (files, directories, globs, --from list.txt) with --out-dir are
a batch: one transcript per file in the same relative layout, written
atomically, never over a newer file; a manifest in the directory makes a
re-run skip what is done and retry what failed; --jobs N worker processes
(default: the cores) or --ray ADDRESS for a Ray cluster (`local` starts one). Exit 1 if any
file failed (each failure is listed and recorded).

The recognizer: Moonshine tiny (the fast tier) unless `voxcli pull
moonshine-base-en` timed the accurate tier live on this machine (30 % fewer
errors; `voxcli doctor` says which runs); --model or `asr.model` choose.

[bold]Examples[/bold]

  voxcli transcribe meeting.wav                     print the transcript
  voxcli transcribe talk.flac --live --speed 4      watch it stream, 4x
  voxcli transcribe --live                          live captions from the mic
  voxcli transcribe --live --device 2 --endpoint-ms 800
  arecord -f S16_LE -r 16000 -c 1 | voxcli transcribe -
  sox in.mp3 -t raw -r 16000 -e signed -b 16 -c 1 - | voxcli transcribe -
  voxcli transcribe talk.wav --live --speed 0 --json | jq -r 'select(.is_final) | .stable'
  voxcli transcribe podcasts/ --out-dir subs --format srt      a whole tree, all cores
  voxcli transcribe --from list.txt --out-dir out --jobs 4     re-run: resumes, retries failures
  voxcli transcribe calls/ --out-dir out --ray HEAD:6379       on a Ray cluster
  voxcli pull moonshine-base-en && voxcli transcribe meeting.wav   the accurate tier
"""


class _NonFiniteWarner:
    """Warn once per run that NaN/inf samples were replaced by silence."""

    def __init__(self) -> None:
        self.warned = False

    def __call__(self, audio: np.ndarray) -> np.ndarray:
        from voxcli.audio.pcm import sanitize

        clean, bad = sanitize(audio)
        if bad and not self.warned:
            err("voxcli: warning: input contains NaN/inf samples; treated as silence")
            self.warned = True
        return clean


def file_chunks(blocks: Iterable[np.ndarray], speed: float, stop: threading.Event) -> Iterator[np.ndarray]:
    """Blocks of a file as decoded, paced at `speed` x real time (0: as fast as consumed).

    Pacing counts the samples already sent, so blocks of any size keep real time and
    only one block of the file is in memory at a time.
    """
    t0, sent = time.monotonic(), 0
    for b in blocks:
        if stop.is_set():
            return
        if speed > 0 and (delay := t0 + sent / SR / speed - time.monotonic()) > 0:
            time.sleep(delay)
        yield b
        sent += b.size


def stdin_chunks(rate: int, fmt: str, stop: threading.Event, clean: Callable[[np.ndarray], np.ndarray]) -> Iterator[np.ndarray]:
    """Raw PCM from stdin as it arrives; a partial sample waits for the next read."""
    from voxcli.audio.pcm import StreamResampler, decode_pcm, sample_width

    width = sample_width(fmt)
    # os.read on the descriptor, not sys.stdin.buffer: a thread blocked in the
    # buffered reader holds its lock, and interpreter shutdown then aborts.
    # (An in-memory stdin, as in tests, has no descriptor: read it directly.)
    try:
        read: Callable[[int], bytes] = functools.partial(os.read, sys.stdin.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        src = sys.stdin.buffer
        read = getattr(src, "read1", src.read)
    resampler = StreamResampler(rate, SR)
    leftover = b""
    block = max(width, int(rate * CHUNK_S) * width)
    while not stop.is_set():
        data = read(block)
        if not data:
            break
        audio, leftover = decode_pcm(leftover + data, fmt)
        if audio.size:
            yield resampler.process(clean(audio))
    tail = resampler.process(np.zeros(0, np.float32), last=True)
    if tail.size:
        yield tail
    if leftover:
        err(f"voxcli: warning: ignored {len(leftover)} trailing byte(s) (an incomplete {fmt} sample)")


def mic_chunks(device: Optional[str], stop: threading.Event) -> tuple[Iterator[np.ndarray], Callable[[], None], str]:
    """Open the microphone now (so a missing device fails before anything starts)."""
    from voxcli.audio.devices import MicCapture

    dev: int | str | None = int(device) if device is not None and device.isdigit() else device
    mic = MicCapture(rate=SR, device=dev)

    def gen() -> Iterator[np.ndarray]:
        for block in mic:
            if stop.is_set():
                return
            yield block

    return gen(), mic.close, f"mic: {mic.device_name}"


def _limit(chunks: Iterator[np.ndarray], seconds: Optional[float]) -> Iterator[np.ndarray]:
    if not seconds:
        yield from chunks
        return
    left = int(seconds * SR)
    for c in chunks:
        if left <= 0:
            return
        yield c[:left]
        left -= c.size


def _emit_line(line: str) -> None:
    with writing_stdout():  # `> /dev/full`: one line and exit 1, not an internal error
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def run_offline(path: str, model: Optional[str], json_out: bool, endpoint_ms: float, quiet: bool = False) -> None:
    from voxcli.audio.files import iter_audio
    from voxcli.asr.models import load_asr
    from voxcli.asr.batch import transcribe_blocks
    from voxcli.asr.endpointer import VADConfig
    from voxcli.events import Caption

    blocks = iter_audio(path, SR)  # the header is checked here: a lying one fails before the model loads
    clean, seen = _NonFiniteWarner(), [0]

    def counted() -> Iterator[np.ndarray]:
        """Decoded blocks, sanitized and counted (memory stays flat in file length)."""
        for b in blocks:
            seen[0] += b.size
            yield clean(b)

    asr, vad = load_asr(model, offline=STATE.offline)
    t0 = time.monotonic()
    count = 0
    for i, u in enumerate(transcribe_blocks(asr, vad, counted(), VADConfig(endpoint_ms=int(endpoint_ms)))):
        count += 1
        if json_out:
            _emit_line(Caption(u.text, "", True, u.end, time.monotonic() - t0, i).to_json())
        else:
            _emit_line(u.text)
    total = time.monotonic() - t0
    audio_s = seen[0] / SR
    if json_out:
        import json

        _emit_line(json.dumps({"event": "asr_stats", "mode": "offline", "model": getattr(asr, "name", model),
                               "audio_s": round(audio_s, 3),
                               "total_s": round(total, 3), "rtf": round(total / audio_s, 4) if audio_s else 0.0,
                               "utterances": count}))
    if not quiet:
        err(f"{count} utterance(s), {audio_s:.1f} s of audio in {total:.1f} s "
            f"(RTF {total / audio_s if audio_s else 0:.2f}, {getattr(asr, 'name', model)})")


def run_stream(chunks: Iterator[np.ndarray], streamer, json_out: bool, source: str,
               stop: threading.Event, on_close: Callable[[], None] | None = None, quiet: bool = False,
               *, drop_behind: bool = False) -> None:
    """Feed `chunks` to the streamer on a thread and show its captions.

    A pipe or a file is sent with back-pressure (`send` waits for the worker, nothing is
    lost, memory stays bounded); the microphone (`drop_behind`) cannot wait, so audio the
    worker falls too far behind on is dropped, counted, and reported in the summary.
    """
    from voxcli.cli.views.asr import NullCaptionView, StreamStatus, caption_view

    failure: list[BaseException] = []

    def feed() -> None:
        try:
            for c in chunks:
                streamer.send(c, block=not drop_behind)
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
            failure.append(e)
            streamer.cancel()
            return
        streamer.finish()

    view = NullCaptionView() if quiet else caption_view(sys.stdout.isatty())
    to_stdout = json_out or quiet or not (sys.stdout.isatty() and view.prints_finals)
    feeder = threading.Thread(target=feed, name="voxcli-transcribe-feed", daemon=True)
    last = None
    try:
        feeder.start()
        for cap in streamer.captions:
            last = cap
            st = streamer.stats
            view.update(cap, StreamStatus(st.audio_s, st.rtf, streamer.pending_s, source, st.dropped_s))
            if json_out:
                _emit_line(cap.to_json())
            elif cap.is_final and cap.stable and to_stdout:
                _emit_line(cap.stable)
    except BaseException as e:  # Ctrl-C, a closed stdout pipe, anything: stop the worker first
        stop.set()
        streamer.cancel()
        # Let the worker leave onnxruntime before the interpreter exits (else C++ aborts).
        streamer.finish(timeout=10)
        view.close()
        if isinstance(e, KeyboardInterrupt) and last is not None and not last.is_final and last.stable and not json_out:
            _emit_line(last.stable)  # what was committed of the utterance in progress
        raise
    finally:
        view.close()
        if on_close:
            on_close()
    feeder.join(5)
    if failure:
        raise failure[0]
    streamer.finish()
    if json_out:
        _emit_line(__import__("json").dumps({**streamer.stats.to_dict(), "model": getattr(streamer.model, "name", None)}))
    st = streamer.stats
    if not quiet:
        err(f"{st.utterances} utterance(s), {st.audio_s:.1f} s of audio ({getattr(streamer.model, 'name', 'asr')}); "
            f"worker RTF {st.rtf:.2f}, "
            f"max lag {st.max_lag_s:.1f} s, {st.skipped} re-decode(s) skipped"
            + (f", {st.dropped_s:.1f} s of audio dropped (the worker fell behind)" if st.dropped_s else ""))


def _open_source(file: Optional[str], use_stdin: bool, live_args: tuple[int, str, float, Optional[str]],
                 stop: threading.Event) -> tuple[Iterator[np.ndarray], str, bool, Callable[[], None] | None]:
    """(chunks, source name, lockstep, close) for stdin PCM, a file paced at --speed, or the microphone."""
    rate, fmt, speed, device = live_args
    clean = _NonFiniteWarner()
    if use_stdin:
        return stdin_chunks(rate, fmt, stop, clean), "stdin", False, None
    if file is not None:
        from voxcli.audio.files import iter_audio

        blocks = iter_audio(file, SR, block_s=CHUNK_S)  # header checked here, before the model or the mic
        return file_chunks((clean(b) for b in blocks), speed, stop), os.path.basename(file), speed == 0, None
    with device_hint("transcribe"):
        chunks, on_close, source = mic_chunks(device, stop)
    return chunks, source, False, on_close


@guarded
def transcribe(
    files: Annotated[Optional[List[str]], typer.Argument(metavar="[FILE|DIR|GLOB|-]...", help="Audio file(s), directories, globs, or - for raw PCM on stdin.", show_default=False)] = None,
    live: Annotated[bool, flag("--live", help="Stream: the mic without FILE, or FILE paced at --speed.")] = False,
    speed: SpeedOpt = 1.0,
    model: ModelOpt = None,
    endpoint_ms: EndpointMsOpt = None,
    duration: Annotated[Optional[float], typer.Option("--duration", min=0.1, help="Stop after this many seconds of audio (streaming input).", show_default=False)] = None,
    step_ms: StepMsOpt = None,
    agreement: AgreementOpt = None,
    rate: Annotated[int, typer.Option("--rate", min=MIN_RATE, max=MAX_RATE, help="Sample rate of stdin PCM.")] = SR,
    device: InputDeviceOpt = None,
    fmt: Annotated[Optional[str], typer.Option("--format", help="Stdin PCM format: s16le (default) or f32le; with --out-dir the transcript format: txt (default), json, srt or vtt.", show_default=False)] = None,
    out_dir: Annotated[Optional[Path], typer.Option("--out-dir", help="Transcribe many inputs into this directory (same relative layout, a manifest to resume).", show_default=False)] = None,
    from_list: Annotated[Optional[str], typer.Option("--from", help="Also read input paths from this list file, one per line (- for stdin).", show_default=False)] = None,
    jobs: JobsOpt = None,
    ray: RayOpt = None,
    ship_audio: ShipAudioOpt = False,
    force: ForceOpt = False,
    json_out: JsonOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
    offline: OfflineOpt = False,
) -> None:
    """Speech to text (the `voxcli transcribe` command)."""
    from voxcli.asr.open_streamer import open_asr_streamer
    from voxcli.config import resolve

    files = files or []
    if out_dir is not None or from_list is not None or len(files) > 1 or any(os.path.isdir(f) for f in files):
        cfg = command_config()
        run_corpus(files, from_list, out_dir, BatchArgs(fmt or "txt", resolve("asr.model", model, config=cfg),
                                                        int(resolve("asr.endpoint_ms", endpoint_ms, config=cfg)),
                                                        jobs, ray, ship_audio, force), json_out, quiet)
        return
    if jobs is not None or ray is not None or ship_audio or force:
        raise UsageError("--jobs, --ray, --ship-audio and --force apply to --out-dir batches")
    file = files[0] if files else None
    fmt = fmt or "s16le"
    if fmt not in ("s16le", "f32le"):
        hint = ("transcript formats apply to batches: add --out-dir DIR" if fmt in ("txt", "json", "srt", "vtt")
                else "use --format s16le or --format f32le")
        raise UsageError(f"unknown PCM format {fmt!r}", hint=hint)
    use_stdin = file == "-" or (file is None and not live and not sys.stdin.isatty())
    if file is None and not live and not use_stdin:
        raise UsageError("nothing to transcribe", hint="give a FILE, `-` for raw PCM on stdin, or --live for the microphone")
    cfg = command_config()
    model = resolve("asr.model", model, config=cfg)
    endpoint = float(resolve("asr.endpoint_ms", endpoint_ms, config=cfg))
    if file not in (None, "-") and not live:
        run_offline(file, model, json_out, endpoint, quiet)
        return
    device = resolve("devices.input", device, config=cfg) if file is None and not use_stdin else None
    stop = threading.Event()
    chunks, source, lockstep, on_close = _open_source(file, use_stdin, (rate, fmt, speed, device), stop)
    try:
        streamer = open_asr_streamer(model, agreement=agreement, step_ms=step_ms, endpoint_ms=int(endpoint),
                                     lockstep=lockstep, offline=STATE.offline)
    except BaseException:
        if on_close:
            on_close()
        raise
    if on_close is not None and not quiet:  # the microphone: tell the person we are listening
        err(f"listening on {source} (Ctrl-C to stop)")
    with device_hint("transcribe"):
        run_stream(_limit(chunks, duration), streamer, json_out, source, stop, on_close, quiet,
                   drop_behind=file is None and not use_stdin)


def register(app: typer.Typer) -> None:
    app.command("transcribe", help=HELP, short_help="Speech to text: file, stdin PCM or live mic captions.")(transcribe)
