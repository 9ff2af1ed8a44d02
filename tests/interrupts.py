"""Ctrl-C in tests: a SIGINT sent to this process by a timer thread after a delay."""

import os
import signal
import threading


def interrupted(call, delay: float) -> bool:
    """Runs call() with a SIGINT after `delay` s; True if it was interrupted."""
    timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
    try:
        # Started inside the try: under load the signal can come before the next line runs, and
        # a KeyboardInterrupt outside it would stop the whole test session.
        timer.start()
        call()
        timer.join()  # finished first: take the late signal here
        return False
    except KeyboardInterrupt:
        return True
    finally:
        timer.cancel()
