"""`signals_held`: a Ctrl-C inside the block is delivered after it, never inside it.

The batch relies on it (tests/corpus/test_batch_signals.py): output file and manifest line are
written together or not at all. These run in pytest's main thread with Python's own SIGINT handler.
"""
from __future__ import annotations

import os
import signal
import threading

import pytest

from voxcli.signals import signals_held


def test_a_ctrl_c_inside_the_block_is_raised_after_it():
    steps: list[str] = []
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("after the signal")  # still runs: the signal waits for the block's end
    assert steps == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is before  # the handler is back


def test_no_signal_no_effect_and_other_threads_pass_through():
    with signals_held():
        pass
    seen: list[object] = []

    def other() -> None:
        with signals_held():  # signal.signal would raise ValueError off the main thread
            seen.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == [signal.getsignal(signal.SIGINT)]


def test_a_custom_handler_gets_the_held_signal():
    got: list[int] = []
    old = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        with signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            assert got == []
        assert got == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, old)


def test_a_second_ctrl_c_is_delivered_at_once():
    steps: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        with signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("held")
            os.kill(os.getpid(), signal.SIGINT)  # the user insists
            steps.append("not reached")
    assert steps == ["held"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
