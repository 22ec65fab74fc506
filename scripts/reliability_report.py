#!/usr/bin/env python3
"""Regenerate tests/RELIABILITY.md from a pytest run: what was tried (per fault) and whether it held.

    python -m pytest -q tests/reliability tests/hub/test_pull.py tests/llm \\
        --junitxml=/tmp/reliability.xml
    python scripts/reliability_report.py /tmp/reliability.xml        # writes tests/RELIABILITY.md
    python scripts/reliability_report.py --run                        # runs that pytest itself first

Each row of the table is one fault of issues 9 and 18, matched to the test cases
that exercise it by (file, name pattern); the row holds when every matched
case passed, fails when any failed, and says "not run" when none ran (so a
renamed or deleted test shows up instead of silently reading as "held").
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "RELIABILITY.md"
TEST_PATHS = ["tests/reliability", "tests/hub/test_pull.py", "tests/llm/test_openai_compat.py",
              "tests/tts/test_text_chunker.py", "tests/tts/test_tts_streamer.py", "tests/cli/test_speak.py",
              # issue 18
              "tests/hub/test_resume.py", "tests/hub/test_cache_corners.py", "tests/runtimes/test_derived.py",
              "tests/asr/test_backpressure.py", "tests/tts/test_tts_backpressure.py",
              "tests/chat/test_agent_llm_faults.py", "tests/cli/test_environment_errors.py",
              "tests/cli/test_memory.py"]


@dataclass(frozen=True)
class Row:
    category: str
    tried: str
    module: str
    """Test file stem (e.g. test_downloads)."""
    pattern: str
    """Regex on the test name, parameters included."""


ROWS = [
    Row("Downloads", "connection dropped at 10/50/90 %: Range resume in the same pull, sha256 verified", "test_downloads", r"connection_dropped_at_pct"),
    Row("Downloads", "server dies at 10/50/90 %: one error line, .part kept, later pull resumes and verifies", "test_downloads", r"server_dies_at_pct"),
    Row("Downloads", "resumed bytes that rotted on disk are caught by the sha256 of the whole", "test_downloads", r"resumed_bytes_that_differ"),
    Row("Downloads", "drop mid-file / a failed pull resumed by the next one", "test_pull", r"dropped_connection_resumes|later_pull_resumes"),
    Row("Downloads", "kill -9 of `voxcli pull` mid-download (fresh and over an old install)", "test_downloads", r"kill_9_mid_download"),
    Row("Downloads", "kill -9 of `voxcli pull` mid-extract (fresh and over an old install)", "test_downloads", r"kill_9_mid_extract"),
    Row("Downloads", "crash between the two renames of a replace: the next pull restores the old model", "test_downloads", r"crash_between"),
    Row("Downloads", "disk full: RLIMIT_FSIZE during download and during extract", "test_downloads", r"file_size_limit"),
    Row("Downloads", "disk full: ENOSPC on a 20 MB tmpfs cache (skipped without root)", "test_downloads", r"no_space_left"),
    Row("Downloads", "model edited after install: refused at first use with the fix; doctor agrees", "test_downloads", r"edited_after_install|touched_but_unchanged|truncated_model"),
    Row("Downloads", "two concurrent pulls download once", "test_pull", r"concurrent_pulls"),
    Row("Archives", "path traversal, absolute paths, tar symlink, zip ../", "test_pull", r"unsafe_archives"),
    Row("Archives", "hardlinks (absolute, ..), symlinked dir then file, char/block devices, fifos, zip symlink/device", "test_archives", r"links_and_devices"),
    Row("Archives", "decompression bomb (tar.gz, zip) over the ad-hoc cap, refused from headers", "test_archives", r"adhoc_bomb|default_cap"),
    Row("Archives", "decompression bomb behind a catalog URL: capped at the catalog size", "test_archives", r"catalog_bomb"),
    Row("Archives", "a member header that lies about its size", "test_archives", r"header_that_lies"),
    Row("Archives", "garbage archives", "test_archives", r"garbage_archives"),
    Row("Archives", "wheel whose index sha256 does not match / wrong catalog sha256", "test_pull", r"index_sha_mismatch|wrong_sha256"),
    Row("Text", "chunker: any Unicode (surrogates, controls, RTL, emoji), any cut: same chunks, nothing lost", "test_text_fuzz", r"chunker_loses_nothing"),
    Row("Text", "chunker invariants (existing property tests)", "test_text_chunker", r"any_cutting|arbitrary_unicode"),
    Row("Text", "streaming speak path on the real voice: any Unicode, any cut, one final sentinel, nothing lost", "test_text_fuzz", r"streaming_speak_path"),
    Row("Text", "`voxcli speak -` with arbitrary bytes: audio or a usage error", "test_text_fuzz", r"cli_speak_stdin_any_bytes"),
    Row("Text", "1 MB vs 100 kB through `speak --raw`, equal audio: flat peak RSS", "test_text_fuzz", r"one_megabyte"),
    Row("Text", "streamer: odd input, 100k characters with a bounded queue", "test_tts_streamer", r"odd_input|long_text_streams"),
    Row("PCM", "random bytes as files (every magic and suffix)", "test_pcm_fuzz", r"random_bytes_as_a_file"),
    Row("PCM", "random bytes on stdin (s16le/f32le, any rate)", "test_pcm_fuzz", r"random_bytes_on_stdin"),
    Row("PCM", "truncated WAV and FLAC (0 % .. 99.9 %)", "test_pcm_fuzz", r"truncated_wav_and_flac"),
    Row("PCM", "sample-rate mismatches: files at 8/22.05/44.1/48 kHz stereo, stdin --rate right and wrong", "test_pcm_fuzz", r"other_rates|stdin_rate"),
    Row("PCM", "NaN/inf/huge values in stdin and in a float WAV; all-NaN and silence", "test_pcm_fuzz", r"nan|all_nan"),
    Row("PCM", "header sample rate that lies (1, 3, 999 Hz) into transcribe, transcribe --live, chat --input: one error line, exit 2, under a 1.5 GB address-space cap", "test_pcm_fuzz", r"header_rate_that_lies"),
    Row("PCM", "header with 65 channels; FLAC header claiming 2^36 samples: refused or read in blocks, never allocated", "test_pcm_fuzz", r"too_many_channels|lies_about_its_length"),
    Row("PCM", "20 minutes of 48 kHz stereo decoded in blocks: peak RSS grows < 50 MB", "test_pcm_fuzz", r"long_file_decodes_in_flat_memory"),
    Row("Processes", "SIGINT/SIGTERM during speak: loading, waiting for stdin, streaming raw, writing a file", "test_signals", r"test_speak\["),
    Row("Processes", "SIGINT/SIGTERM during transcribe: loading, waiting for stdin, streaming stdin, offline file", "test_signals", r"test_transcribe\["),
    Row("Processes", "SIGINT/SIGTERM during chat: loading, waiting for the first token, speaking", "test_signals", r"test_chat\["),
    Row("Processes", "SIGINT/SIGTERM during pull: download, extract", "test_signals", r"test_pull\["),
    Row("Processes", "`speak --raw | head -c 100` and `transcribe - | head -n 1` end quietly", "test_signals", r"head_c_100|head_n_1"),
    Row("Processes", "stdin closed early (before any text, mid-sentence, mid-sample, empty)", "test_signals", r"stdin_closed"),
    Row("LLM endpoint", "refused connection", "test_llm_faults", r"refused_connection"),
    Row("LLM endpoint", "TLS failure (https:// to a plain-HTTP port)", "test_llm_faults", r"https_to_a_plain"),
    Row("LLM endpoint", "slow loris (no bytes, headers only, keep-alive comments only) at a 1 s timeout", "test_llm_faults", r"slow_loris|keepalive_comments"),
    Row("LLM endpoint", "malformed SSE lines and chunks (14 kinds); an event that never ends", "test_llm_faults", r"malformed_sse|never_ends"),
    Row("LLM endpoint", "a 100k-token reply bounded by max_tokens; client reusable after", "test_llm_faults", r"100k_token|reusable_after"),
    Row("LLM endpoint", "dropped mid-answer, dropped before the first token, HTTP errors", "test_openai_compat", r"drop_mid_answer|drop_before|http_errors"),
    Row("Secrets", "API key absent from stdout, stderr, DEBUG logs, turn log, files, --debug traces (echoing servers)", "test_secrets", r"key_never_appears_in_output"),
    Row("Secrets", "API key absent from exceptions, reprs and formatted tracebacks", "test_secrets", r"exceptions_reprs"),
    Row("Secrets", "API key absent from a real `voxcli --debug chat` process", "test_secrets", r"real_process_debug"),
    Row("LLM endpoint", "first tokens, then keep-alive comments / empty deltas / blank deltas / silence forever: cut off after the progress timeout (1 s), the server sees us leave", "test_llm_faults", r"stops_making_progress|blank_deltas_from_the_very_start"),
    Row("LLM endpoint", "a slow but steady answer is not cut by the progress timeout", "test_llm_faults", r"slow_but_steady"),
    Row("LLM endpoint", "an endless reply without max_tokens stops at the client's cap (4096 tokens)", "test_llm_faults", r"without_max_tokens_an_endless"),
    Row("LLM endpoint", "one 900 KB delta (with and without max_tokens): capped, counted as characters / 4, answer ends there", "test_llm_faults", r"one_giant_delta"),
    Row("Secrets", "API key echoed into the answer (split across deltas, or in one delta): masked before any consumer sees it", "test_secrets", r"echoed_into_the_answer"),
    Row("Memory", "`transcribe FILE` and `transcribe FILE --live --speed 0`: 3 min at 192 kHz peaks within 30 MB of 10 s (old: whole-file decode, ~+140 MB)", "test_memory", r"memory_is_flat_in_file_length"),
    Row("Environment", "an existing directory as `-o`, or `-o` under a regular file: exit 2 before the voice loads", "test_environment_errors", r"existing_directory_as_output|under_a_regular_file"),
    Row("Environment", "an output directory that refuses new files (/sys, even to root): one line, exit 1", "test_environment_errors", r"unwritable_output_directory"),
    Row("Environment", "stdout on /dev/full (speak --raw/--json, transcribe, transcribe --live --json): one line, exit 1, no partial -o file", "test_environment_errors", r"stdout_on_dev_full"),
    Row("Environment", "file size limit (RLIMIT_FSIZE) while writing the WAV: one line naming the limit, exit 1, no partial file", "test_environment_errors", r"file_size_limit_while_writing"),
    Row("Environment", "model cache under a file, under a missing /proc dir, or in /sys: names the cache and VOXCLI_CACHE_DIR, exit 1", "test_environment_errors", r"unusable_cache"),
    Row("Environment", "voice .onnx rotted with size and mtime unchanged: exit 4 naming the file; a corrupt ASR model: exit 4", "test_environment_errors", r"corrupt_voice_onnx|corrupt_asr_model"),
    Row("Environment", "voice file removed while it is being loaded: exit 3 naming the file", "test_environment_errors", r"removed_during_load"),
    Row("Config", "unknown config keys: `speak` and `transcribe` warn once each (as `chat` does)", "test_environment_errors", r"unknown_config_keys_warn_once"),
    Row("Config", "`config set` into a directory that refuses new files: names the config file, exit 1", "test_environment_errors", r"config_set_into_an_unwritable"),
    Row("Downloads", "file changed on the server between cut and resume (ETag / Last-Modified, If-Range honoured or ignored): one version installed, never a splice", "test_resume", r"file_changed_between_cut"),
    Row("Downloads", "resume without validator or hash starts over; a 206 at another offset is not appended", "test_resume", r"without_validator|starts_elsewhere"),
    Row("Downloads", "partial of an earlier run not resumed into a new version; a shrunk file's 416 is not 'complete'", "test_resume", r"earlier_run|longer_than_the_new"),
    Row("Downloads", "redirect loop / undecodable body as first catalog source: the next source installs it", "test_cache_corners", r"redirect_loop_or_undecodable"),
    Row("Downloads", "kill -9 leftovers listed by doctor and removed by rm --partials; a live pull's are kept", "test_cache_corners", r"leftovers_of_a_killed_pull"),
    Row("Downloads", "same URL pulled twice: already installed, exit 0", "test_cache_corners", r"same_url_twice"),
    Row("Archives", "an archive holding manifest.json: exit 2, nothing installed or listed", "test_cache_corners", r"manifest_json"),
    Row("Archives", "30k-member tar.gz extracts in linear time (< 30 s)", "test_archives", r"extraction_is_linear"),
    Row("Cache", "a flipped byte in a recorded derived file: check_derived and doctor report it, --fix removes it", "test_cache_corners", r"derived"),
    Row("Cache", "flipped byte in the split Piper decoder / the built LLM weights / tampered LLM info JSON / unrecorded legacy files: rebuilt, same audio and logits", "test_derived", r"."),
    Row("Memory", "12 min of audio sent to the streaming ASR faster than real time: send() waits, pending <= 10 s", "test_backpressure", r"unpaced_input_is_consumed"),
    Row("Memory", "blocking send of unpaced audio loses nothing (same words as paced)", "test_backpressure", r"loses_nothing"),
    Row("Memory", "live input the worker cannot keep up with: the oldest audio is dropped and counted (dropped_s)", "test_backpressure", r"drops_the_oldest"),
    Row("Memory", "10 min recording transcribed offline in blocks: only the utterance in progress is held", "test_backpressure", r"offline_blocks_keep_memory_flat|blocks_give_the_whole_array"),
    Row("Memory", "5 MB of text piped into the TTS streamer: the sender waits, memory flat, everything spoken", "test_tts_backpressure", r"."),
    Row("LLM endpoint", "chat agent: a stalled server ends the turn with a spoken cut-off notice; a key echoed in the answer is masked in history, events and turns.jsonl", "test_agent_llm_faults", r"stalled_server|key_echoed"),
]


@dataclass
class Case:
    module: str
    name: str
    outcome: str  # passed | failed | skipped
    seconds: float


def read_junit(path: Path) -> list[Case]:
    cases = []
    for tc in ET.parse(path).getroot().iter("testcase"):
        module = (tc.get("classname") or "").rsplit(".", 1)[-1]
        outcome = "passed"
        if tc.find("failure") is not None or tc.find("error") is not None:
            outcome = "failed"
        elif tc.find("skipped") is not None:
            outcome = "skipped"
        cases.append(Case(module, tc.get("name") or "", outcome, float(tc.get("time") or 0)))
    return cases


def verdict(cases: list[Case]) -> str:
    if not cases:
        return "not run"
    if any(c.outcome == "failed" for c in cases):
        return "**FAILED**"
    if all(c.outcome == "skipped" for c in cases):
        return "skipped"
    return "held"


def render(cases: list[Case], source: str) -> str:
    lines = [
        "# Reliability: what was tried and what held",
        "",
        "Generated by `scripts/reliability_report.py` from a pytest run "
        f"({source}); do not edit by hand. Every row is one fault of issues 9 and 18, run",
        "for real (loopback servers, real subprocesses and signals, the real models);",
        "a row holds when every test case matching it passed.",
        "",
        "| area | what was tried | cases | passed | result | time (s) |",
        "| --- | --- | ---: | ---: | --- | ---: |",
    ]
    used: set[int] = set()
    for row in ROWS:
        rx = re.compile(row.pattern)
        hits = [i for i, c in enumerate(cases) if c.module == row.module and rx.search(c.name)]
        used.update(hits)
        matched = [cases[i] for i in hits]
        passed = sum(c.outcome == "passed" for c in matched)
        secs = sum(c.seconds for c in matched)
        tried = row.tried.replace("|", "\\|")  # a shell pipe inside a table cell
        lines.append(f"| {row.category} | {tried} | {len(matched)} | {passed} | {verdict(matched)} | {secs:.1f} |")
    own = {p.stem for p in (ROOT / "tests" / "reliability").glob("test_*.py")}
    rel = [c for i, c in enumerate(cases) if c.module in own and i not in used]
    total = sum(c.seconds for c in cases)
    failed = [c for c in cases if c.outcome == "failed"]
    lines += [
        "",
        f"{len(cases)} test cases in this run, {len(failed)} failed, "
        f"{sum(c.outcome == 'skipped' for c in cases)} skipped, {total:.0f} s of test time.",
    ]
    if rel:
        lines += ["", "Cases in the reliability modules not mapped to a row (add a row):", ""]
        lines += [f"- `{c.module}::{c.name}` ({c.outcome})" for c in rel]
    if failed:
        lines += ["", "Failed cases:", ""] + [f"- `{c.module}::{c.name}`" for c in failed]
    lines += [
        "",
        "Benchmark (not a test): `python benchmarks/bench_asr_long.py --hours 4` streams",
        "hours of speech through the ASR streamer at accelerated pace and reports",
        "memory and per-step cost over time (they must stay flat).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("junit", nargs="?", type=Path, help="pytest --junitxml output")
    ap.add_argument("--run", action="store_true", help="run the reliability tests first")
    ap.add_argument("-o", "--output", type=Path, default=OUT)
    args = ap.parse_args(argv)
    if args.run:
        junit = Path(tempfile.mkstemp(suffix=".xml")[1])
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TEST_PATHS,
                        f"--junitxml={junit}"], cwd=ROOT)
        source = f"`--run`, {time.monotonic() - t0:.0f} s wall"
    elif args.junit:
        junit, source = args.junit, f"`{args.junit.name}`"
    else:
        ap.error("give a junit XML file or --run")
    cases = read_junit(junit)
    args.output.write_text(render(cases, source), encoding="utf-8")
    print(f"wrote {args.output} ({len(cases)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
