"""gpuprofile.Stream: a CUDA stream owned by Python, for graph-mode benchmarks and raw-CUDA code
that has no framework to make one (torch and CuPy users pass their own streams instead)."""

from __future__ import annotations

import weakref

from . import _C


class Stream:
    """A non-blocking CUDA stream on the current device, destroyed by close() or when collected.

    Pass it wherever gpuprofile takes `stream=`; `.cuda_stream` is the raw handle (an int) for
    other libraries, and `__cuda_stream__` follows the CUDA Python stream protocol.
    """

    def __init__(self):
        self.cuda_stream = _C._stream_create()
        self._finalizer = weakref.finalize(self, _C._stream_destroy, self.cuda_stream)

    def __cuda_stream__(self):
        return (0, self.cuda_stream)

    def synchronize(self) -> None:
        """Wait until everything enqueued on the stream has run (the GIL is released)."""
        _C._stream_synchronize(self.cuda_stream)

    def close(self) -> None:
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        state = "closed" if not self._finalizer.alive else hex(self.cuda_stream)
        return f"<gpuprofile.Stream {state}>"
