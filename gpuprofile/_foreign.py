"""Other CUPTI clients in this process: is torch.profiler (Kineto) using CUPTI right now?

torch.profiler keeps CUPTI's one callback subscriber for the rest of the process once it has run,
even when it is not recording. gpuprofile may then take CUPTI over (csrc/core/cupti_loader.c), but
never while torch records or is warming up, since that would take Kineto's records away. These
checks never import torch; they look only at a torch that is already loaded.
"""

from __future__ import annotations

import gc
import sys


def torch_profiler_active() -> bool:
    """Whether torch.profiler (or the legacy autograd profiler) is recording in this process.
    Cheap: two attribute reads."""
    prof = sys.modules.get("torch.autograd.profiler")
    if prof is not None and getattr(prof, "_is_profiler_enabled", False):
        return True
    torch = sys.modules.get("torch")
    try:
        return bool(torch._C._autograd._profiler_enabled()) if torch is not None else False
    except Exception:  # another torch version: no such function
        return False


def torch_profiler_holds_cupti() -> bool:
    """torch_profiler_active(), or a torch profiler prepared but not yet recording (the warm-up
    steps of a schedule, when Kineto has CUPTI's kinds enabled already): a profile object that was
    entered and has no results yet. Walks the heap, so it is only asked before a takeover."""
    if torch_profiler_active():
        return True
    prof = sys.modules.get("torch.autograd.profiler")
    kind = getattr(prof, "profile", None)
    if not isinstance(kind, type):
        return False
    return any(isinstance(o, kind) and getattr(o, "entered", False)
               and getattr(o, "kineto_results", None) is None for o in gc.get_objects())
