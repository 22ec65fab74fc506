"""Corpus scale: many files (or many lines of text) through one model, on all cores or a Ray cluster.

Why a package of its own: `transcribe` and `speak --from` share everything
but the model call and the output writer -- the list of work, the manifest
that makes a re-run resume, the progress figures, and the executors (local
processes or Ray actors). Modules, one concern each:

- `items`     what one unit of work is and how a re-run recognizes it (fingerprint)
- `inputs`    files, directories, globs and list files -> items with a relative layout
- `manifest`  the append-only JSON-lines record in the output dir (resume, retry failed)
- `work`      the worker side: load the model once per process, run one item
- `formats`   transcript renderings (txt, json, srt, vtt)
- `backends`  in-process and local process-pool executors (concurrent.futures)
- `ray_backend` the same over Ray actors (optional extra `voxcli[ray]`)
- `progress`  counters, throughput, ETA and the events a display renders
- `batch`     the driver: plan (skip what is done), dispatch, write, record
- `asr_job` / `tts_job`  the two jobs; `transcribe_many` is the library entry
"""
