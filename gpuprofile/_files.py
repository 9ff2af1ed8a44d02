"""Files on disk, the one way every writer in the package uses: atomic writes, strict JSON.

A regular file is written to a temporary file in the destination's folder, flushed, fsynced and
renamed over the destination, so a process killed (or a serializer that raises) half way leaves
the old file as it was: a good baseline is never replaced by half of a new one. The new file keeps
the mode of the file it replaces (and its owner, where the process may give it: as root). An
exception, KeyboardInterrupt included, removes the temporary file; one left by a process killed
outright (SIGKILL, power loss), named `.<name>.gpuprofile-<pid>-<random>.tmp` beside the
destination, is removed by the next write there once its process is gone.

What is not a regular file is written in place, never replaced: a FIFO, a character device
(/dev/null) or an open descriptor (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N, written
through that descriptor, so that `--json /dev/stdout > out` appends to what was printed). A
read-only file (no write permission for this process, or no write bit at all, which root would
otherwise ignore) is refused with PermissionError naming it, unless the writer passes
replace_read_only=True: a baseline made read-only is kept so on purpose.

JSON is written strictly (`allow_nan=False`): NaN and infinities become null, and the readers here
refuse the NaN / Infinity tokens that Python's json module would otherwise accept.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import gzip as _gzip
import io
import json
import math
import os
import re
import secrets
import stat
import sys

_TEMP_TAG = "gpuprofile"
# a descriptor named as a path: written through that descriptor (its offset is the shell's)
_DESCRIPTOR = re.compile(r"^/(?:dev/(?:(stdout)|(stderr)|fd/(\d+))|proc/self/fd/(\d+))$")


def _temp_name(path: str) -> str:
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.{_TEMP_TAG}-{os.getpid()}-{secrets.token_hex(4)}.tmp")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (EPERM): alive
        return True
    return True


def _remove_stale_temps(path: str) -> None:
    """Remove the temporary files that writers of `path` killed outright left behind (their
    process is gone); best effort: a folder that cannot be listed is left as it is."""
    folder, name = os.path.split(path)
    stale = re.compile(rf"^\.{re.escape(name)}\.{_TEMP_TAG}-(\d+)-[0-9a-f]+\.tmp$")
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return
    for other in names:
        m = stale.match(other)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
            _remove(os.path.join(folder, other))


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


def _descriptor(given: str) -> int | None:
    m = _DESCRIPTOR.match(os.path.abspath(given)) if os.name == "posix" else None
    if m is None:
        return None
    return 1 if m.group(1) else 2 if m.group(2) else int(m.group(3) or m.group(4))


def _existing(path: str):
    """os.stat(path) (links followed), or None where nothing is there yet."""
    try:
        return os.stat(path)
    except OSError:
        return None  # missing, or a problem that the open then names


def _refuse_read_only(given: str, st) -> None:
    if not os.access(given, os.W_OK) or not st.st_mode & 0o222:
        raise PermissionError(errno.EACCES, f"read-only file (mode {stat.S_IMODE(st.st_mode):04o}), "
                              "kept: make it writable (chmod u+w) to let it be replaced", given)


def _open_in_place(given: str) -> int:
    """A descriptor writing to `given` (not a regular file) where it is: a dup of a descriptor
    it names, else the FIFO or device opened for writing (a FIFO waits for its reader)."""
    fd = _descriptor(given)
    if fd is not None:
        for stream in (sys.stdout, sys.stderr):  # what was printed comes first
            with contextlib.suppress(Exception):
                stream.flush()
        try:
            return os.dup(fd)
        except OSError as e:
            raise _naming(e, given) from None
    try:
        return os.open(given, os.O_WRONLY | getattr(os, "O_BINARY", 0))
    except OSError as e:
        raise _naming(e, given) from None


@contextlib.contextmanager
def _layers(fd: int, mode: str, gzip: bool, encoding: str, compresslevel: int, buffering: int,
            durable: bool):
    """The file object written to descriptor `fd` (closed at the end): gzip and text layers on
    request; flushed, and fsynced when `durable`, on a clean exit."""
    with os.fdopen(fd, "wb", buffering=buffering) as raw:
        z = _gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=compresslevel) if gzip else None
        binary = z if z is not None else raw
        f = _text(binary, encoding) if mode == "w" else binary
        yield f
        f.flush()
        if z is not None:
            z.close()  # writes the gzip trailer into raw (which stays open)
        raw.flush()
        if durable:
            os.fsync(raw.fileno())


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", *, gzip: bool = False, encoding: str = "utf-8",
                 compresslevel: int = 1, buffering: int = 1 << 16, replace_read_only: bool = False):
    """Open `path` for writing as a temporary file beside it; on a clean exit of the block the
    file is flushed, fsynced and renamed over `path` (keeping its mode, and owner where the
    process may), else removed and `path` left untouched. A FIFO, a device or a descriptor at
    `path` is written in place instead (see the module's notes).

    mode: 'w' (text, `encoding`) or 'wb' (bytes). gzip=True compresses (level `compresslevel`:
    1 by default, since the files compressed here are large traces where speed matters more).
    A symbolic link at `path` is followed: its target is replaced. A read-only file is refused
    (PermissionError) unless replace_read_only=True. An OSError names `path` as given.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write: mode must be 'w' or 'wb', got {mode!r}")
    given = os.fspath(path)
    st = _existing(given)
    if _descriptor(given) is not None or st is not None and not stat.S_ISREG(st.st_mode):
        with _layers(_open_in_place(given), mode, gzip, encoding, compresslevel, buffering,
                     durable=False) as f:
            yield f
        return
    if st is not None and not replace_read_only:
        _refuse_read_only(given, st)
    path = os.path.realpath(given)
    _remove_stale_temps(path)
    tmp = _temp_name(path)
    try:
        # O_EXCL: never write through a file someone else put there; 0o666 leaves the mode to
        # the umask, as open() would for a new file
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as e:
        raise _naming(e, given) from None
    try:
        if st is not None:
            _keep_mode_and_owner(fd, st)
        with _layers(fd, mode, gzip, encoding, compresslevel, buffering, durable=True) as f:
            yield f
        os.replace(tmp, path)
    except BaseException as e:
        _remove(tmp)
        if isinstance(e, OSError) and e.errno is not None and e.filename in (None, tmp):
            raise _naming(e, given) from None
        raise
    _sync_folder(os.path.dirname(path))


def _keep_mode_and_owner(fd: int, st) -> None:
    """The replaced file's mode on the new one, and its owner and group where this process may
    give them (root; a group it belongs to); what it may not give stays its own."""
    if hasattr(os, "fchmod"):
        os.fchmod(fd, stat.S_IMODE(st.st_mode))
    if hasattr(os, "fchown"):
        mine = os.fstat(fd)
        if (mine.st_uid, mine.st_gid) != (st.st_uid, st.st_gid):
            with contextlib.suppress(OSError):
                os.fchown(fd, st.st_uid, st.st_gid)
            os.fchmod(fd, stat.S_IMODE(st.st_mode))  # chown clears set-id bits: set them again


class _Text(io.TextIOWrapper):
    """A text layer that leaves the binary file it wraps open when it goes away (the caller
    flushes, fsyncs and closes that one)."""

    def __del__(self):
        with contextlib.suppress(Exception):
            self.detach()


def _text(binary, encoding: str) -> io.TextIOWrapper:
    return _Text(binary, encoding=encoding, newline="")


def check_writable(path, *, replace_read_only: bool = False) -> None:
    """Raise OSError (naming `path`) unless a file can be written at `path` the way atomic_write
    writes one: `path` is not a folder nor a read-only file, and its folder takes a new file; a
    FIFO, device or descriptor there must be writable (it is not opened: a FIFO would wait for a
    reader). Nothing is left behind."""
    given = os.fspath(path)
    if os.path.isdir(given):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), given)
    st = _existing(given)
    if _descriptor(given) is not None or st is not None and not stat.S_ISREG(st.st_mode):
        if not os.access(given, os.W_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), given)
        return
    with contextlib.suppress(_Probe), atomic_write(given, "wb", replace_read_only=replace_read_only):
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
    text = dumps_json(data, indent=indent)
    with atomic_write(path, "w") as f:
        f.write(text)
    return os.fspath(path)


def dumps_json(data, *, indent: int | None = 1) -> str:
    """json.dumps(finite_or_none(data), indent=indent, allow_nan=False), the same text byte for
    byte, in a fraction of the time: json's indented output is its pure-Python encoder (about
    30 us a row of `gpuprofile compare --json`, 12 s for 400k rows), so each container of plain
    values (str, int, float, bool, None) goes to the C encoder whole, with the newline and
    indentation of its depth as the item separator; only the containers holding containers are
    walked here."""
    if indent is None or _C_INDENTS:
        return json.dumps(finite_or_none(data), indent=indent, allow_nan=False)
    out: list = []
    try:
        _indented(data, " " * indent if isinstance(indent, int) else indent, 0, out)
    except _Irregular:  # a key the walk does not spell as json would: json's own encoder
        return json.dumps(finite_or_none(data), indent=indent, allow_nan=False)
    return "".join(out)


# Python 3.13's C encoder indents by itself (json.dumps with indent no longer falls back to the
# pure-Python encoder): the walk below is only for the older ones.
_C_INDENTS = sys.version_info >= (3, 13)


class _Irregular(Exception):
    pass


_PLAIN = frozenset({str, int, float, bool, type(None)})


@functools.cache
def _flat_encoder(item_separator: str):
    return json.JSONEncoder(allow_nan=False, separators=(item_separator, ": ")).encode


def _flat(value, pad: str, level: int) -> str:
    """The indented text of a non-empty container of plain values, or of a plain value."""
    encode = _flat_encoder(",\n" + pad * (level + 1))
    try:
        text = encode(value)
    except ValueError:  # NaN or an infinity: null, as finite_or_none writes it
        text = encode(finite_or_none(value))
    if not isinstance(value, (dict, list, tuple)):
        return text
    return f"{text[0]}\n{pad * (level + 1)}{text[1:-1]}\n{pad * level}{text[-1]}"


def _rows(items: list) -> bool:
    """Whether `items` are all non-empty dicts (not subclasses) of plain values: a table's rows."""
    return {dict}.issuperset(map(type, items)) and all(
        row and _PLAIN.issuperset(map(type, row.values())) for row in items)


def _flat_rows(rows: list, pad: str, level: int) -> str:
    """The indented text of a list of rows (see _rows) in one call of the C encoder: each row's
    items separated at the rows' depth, then each boundary between rows, which the encoder
    spelled the same way, given the list's depth. Those boundaries are the only place where
    `}`, a newline and `{` meet: a newline inside a string is always escaped."""
    inner, outer = pad * (level + 2), pad * (level + 1)
    encode = _flat_encoder(",\n" + inner)
    try:
        text = encode(rows)
    except ValueError:  # NaN or an infinity: null, as finite_or_none writes it
        text = encode(finite_or_none(rows))
    body = text[2:-2].replace("},\n" + inner + "{", f"\n{outer}}},\n{outer}{{\n{inner}")
    return f"[\n{outer}{{\n{inner}{body}\n{outer}}}\n{pad * level}]"


def _indented(value, pad: str, level: int, out: list) -> None:
    if isinstance(value, dict):
        items = value.values()
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        out.append(_flat(value, pad, level))
        return
    if not items:
        out.append("{}" if isinstance(value, dict) else "[]")
        return
    if _PLAIN.issuperset(map(type, items)):
        out.append(_flat(value, pad, level))
        return
    if isinstance(value, list) and _rows(value):
        out.append(_flat_rows(value, pad, level))
        return
    inner = "\n" + pad * (level + 1)
    out.append(("{" if isinstance(value, dict) else "[") + inner)
    for k, item in enumerate(value.items() if isinstance(value, dict) else value):
        if k:
            out.append("," + inner)
        if isinstance(value, dict):
            key, item = item
            if not isinstance(key, str):
                raise _Irregular
            out.append(json.encoder.encode_basestring_ascii(key) + ": ")
        _indented(item, pad, level + 1, out)
    out.append("\n" + pad * level + ("}" if isinstance(value, dict) else "]"))


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
