"""Backward launches on their forward lines: binding and calibrating torch's autograd marks.

csrc/tracing/autograd.c marks each launch with torch's autograd sequence numbers (the forward
thread's next one, or the node being evaluated in the backward), read through three functions of
torch's already loaded library. gpuprofile never imports torch: this runs only when the user has.
The node's fields are torch's private layout, so they are found once per process on a tiny CPU
graph whose sequence numbers and thread ids Python knows: two nodes made on two threads, read
from their pre-hooks during a backward. Anything unexpected leaves the marks off and says why.
"""

from __future__ import annotations

import os
import sys
import threading

from .. import _C

WORDS = 16  # how much of a node the calibration reads (the fields sit in its first 64 bytes)
_found: tuple | None = None  # (why not, None) or (None, (sequence word, thread word))


def calibrate() -> str | None:
    """Bind and calibrate, once per process, when the user imported torch; None when done, else
    why the marks cannot be on."""
    global _found
    torch = sys.modules.get("torch")
    if torch is None:
        return "torch is not imported"
    if _found is None:
        _found = _calibrate(torch)
    return _found[0]


def enable() -> str | None:
    """Turn the marks on for the launches from now on; None when on, else why they are off."""
    why = calibrate()
    if why is None:
        _C._autograd_enable(*_found[1])
    return why


def disable() -> None:
    _C._autograd_disable()


def _library(torch) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "lib", "libtorch_cpu.so")


def _calibrate(torch) -> tuple:
    """(why not, None) or (None, (sequence word, thread word or -1))."""
    try:
        _C._autograd_bind(_library(torch))
        return None, _find_words(*_probe_two_nodes(torch))
    except Exception as e:  # noqa: BLE001 - torch's own errors too (an old torch without
        # Node.register_prehook): a calibration that fails never stops the profile
        return f"backward lines are off: {type(e).__name__}: {e}", None


def _probe_two_nodes(torch) -> tuple:
    """((sequence number, torch thread id, node words) of two nodes made on two threads)."""
    made: dict = {}
    with torch.inference_mode(False), torch.enable_grad():  # whatever mode the caller is in
        leaf = torch.ones(1, requires_grad=True)
        first = leaf * 2
        made["first"] = (first, _C._autograd_forward()[1])

        def other_thread():  # a fresh counter, pushed past small values other fields may hold
            x = leaf * 1
            for _ in range(40):
                x = x * 1
            made["second"] = (first + x, _C._autograd_forward()[1])

        t = threading.Thread(target=other_thread, name="gpuprofile-autograd-calibration")
        t.start()
        t.join()
    if "second" not in made:
        raise RuntimeError("the calibration's second thread made no node")
    words: dict = {}
    nodes = {}
    for key in ("first", "second"):
        node = made[key][0].grad_fn
        nodes[key] = node

        def hook(grad_outputs, key=key):
            words[key] = _C._autograd_probe(WORDS)
            return None

        node.register_prehook(hook)
    made["second"][0].sum().backward()
    if set(words) != {"first", "second"} or None in words.values():
        raise RuntimeError("the calibration's pre-hooks saw no current node")
    return tuple((nodes[k]._sequence_nr(), made[k][1], words[k]) for k in ("first", "second"))


def _find_words(a: tuple, b: tuple) -> tuple:
    """(sequence word, thread word or -1) from two nodes' (sequence, thread id, words): the one
    word that holds each node's value; distinct values on the two nodes make a match mean it."""
    if a[0] == b[0]:
        raise RuntimeError("the calibration's nodes have the same sequence number")
    seq = [k for k in range(WORDS) if a[2][k] == a[0] and b[2][k] == b[0]]
    if len(seq) != 1:
        raise RuntimeError(f"no single word holds a node's sequence number ({seq})")
    thread = [k for k in range(WORDS) if k != seq[0] and a[2][k] == a[1] and b[2][k] == b[1]]
    # torch versions that fill the node's thread id only while its profiler runs: no thread word
    return seq[0], thread[0] if a[1] != b[1] and len(thread) == 1 else -1
