"""Files on disk, the one way every writer in the package uses: atomic writes, strict JSON.

A file is written to a temporary file in the destination's folder, flushed, fsynced and renamed
over the destination, so a process killed (or a serializer that raises) half way leaves the old
file as it was: a good baseline is never replaced by half of a new one. An exception removes the
temporary file; only a process killed outright (SIGKILL, power loss) can leave one behind, named
`.<name>.<pid>.<random>.tmp` beside the destination.

JSON is written strictly (`allow_nan=False`): NaN and infinities become null, and the readers here
refuse the NaN / Infinity tokens that Python's json module would otherwise accept.
"""

from __future__ import annotations

import contextlib
import errno
import gzip as _gzip
import io
import json
import math
import os
import secrets


def _temp_name(path: str) -> str:
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


def _naming(e: OSError, path: str) -> OSError:
    """The same error about `path` (the destination), not the temporary file."""
    return type(e)(e.errno, e.strerror, path) if e.errno is not None else e


def _sync_folder(folder: str) -> None:
    """fsync the folder so the rename itself survives a power loss (best effort: not every
    platform or file system lets a folder be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", *, gzip: bool = False, encoding: str = "utf-8",
                 compresslevel: int = 1, buffering: int = 1 << 16):
    """Open `path` for writing as a temporary file beside it; on a clean exit of the block the
    file is flushed, fsynced and renamed over `path`, else removed and `path` left untouched.

    mode: 'w' (text, `encoding`) or 'wb' (bytes). gzip=True compresses (level `compresslevel`:
    1 by default, since the files compressed here are large traces where speed matters more).
    A symbolic link at `path` is followed: its target is replaced. An OSError names `path` as
    given.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write: mode must be 'w' or 'wb', got {mode!r}")
    given = os.fspath(path)
    path = os.path.realpath(given)
    tmp = _temp_name(path)
    try:
        # O_EXCL: never write through a file someone else put there; 0o666 leaves the mode to
        # the umask, as open() would for a new file
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as e:
        raise _naming(e, given) from None
    try:
        with os.fdopen(fd, "wb", buffering=buffering) as raw:
            z = _gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=compresslevel) if gzip else None
            binary = z if z is not None else raw
            f = _text(binary, encoding) if mode == "w" else binary
            yield f
            f.flush()
            if z is not None:
                z.close()  # writes the gzip trailer into raw (which stays open)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        _remove(tmp)
        if isinstance(e, OSError) and e.errno is not None and e.filename in (None, tmp):
            raise _naming(e, given) from None
        raise
    _sync_folder(os.path.dirname(path))


class _Text(io.TextIOWrapper):
    """A text layer that leaves the binary file it wraps open when it goes away (the caller
    flushes, fsyncs and closes that one)."""

    def __del__(self):
        with contextlib.suppress(Exception):
            self.detach()


def _text(binary, encoding: str) -> io.TextIOWrapper:
    return _Text(binary, encoding=encoding, newline="")


def check_writable(path) -> None:
    """Raise OSError (naming `path`) unless a file can be written at `path` the way atomic_write
    writes one: `path` is not a folder and its folder takes a new file. Nothing is left behind."""
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
    with contextlib.suppress(_Probe), atomic_write(path, "wb"):
        raise _Probe  # abandon the write: the temporary file is removed, `path` untouched


class _Probe(Exception):
    pass


def finite_or_none(value):
    """`value` with every non-finite float (NaN, inf) in it, at any depth of dicts, lists and
    tuples, replaced by None: what strict JSON can hold."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    return value


def write_json(path, data, *, indent: int | None = 1) -> str:
    """Write `data` as strict JSON (non-finite numbers as null) to `path`, atomically. Returns
    the path."""
    with atomic_write(path, "w") as f:
        json.dump(finite_or_none(data), f, indent=indent, allow_nan=False)
    return os.fspath(path)


def save_figure(fig, path, **savefig_kwargs) -> None:
    """fig.savefig(path, ...) written atomically; the format comes from the name's extension
    (matplotlib's default when there is none), as savefig(path) would choose it."""
    ext = os.path.splitext(os.fspath(path))[1].lstrip(".").lower()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format=ext or None, **savefig_kwargs)


def _no_constants(token: str):
    raise ValueError(f"{token} is not valid JSON (a non-finite number must be written as null)")


def loads_json(text):
    """json.loads, strict: NaN, Infinity and -Infinity are refused (ValueError), and a document
    nested too deeply for the parser is a ValueError too, not a RecursionError."""
    try:
        return json.loads(text, parse_constant=_no_constants)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply to read") from None


def read_json(path):
    """The strict JSON document in the file at `path` (see loads_json); OSError or ValueError."""
    with open(path, encoding="utf-8") as f:
        return loads_json(f.read())
