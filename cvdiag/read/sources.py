"""Find and open the inputs: files, gzip files, stdin, FIFOs, directories.

Every input comes out as blocks that end on a line boundary and never between the
records of a split container line, whatever it is, with no line kept longer than
``parsing.MAX_LINE``. Files are read, not mapped: a log may shrink under the reader.
"""

from __future__ import annotations

import gzip
import os
import stat
import sys
import zlib
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from cvdiag.read import rejoin
from cvdiag.read.parsing import MAX_LINE, PLACEHOLDER_CUT, PLACEHOLDER_LONG, TOO_LONG

_BLOCK = 16 << 20  # streamed sources (stdin, gzip) are read in blocks this big
_FILE_BLOCK = 2 << 20  # files: small enough that a block and its copies cost little memory
_GZIP_MAGIC = b"\x1f\x8b"
_RUN_GAP = 16 << 10  # lines read again this close together: one ``pread`` (the gap costs less than a call)
_RUN_MAX = 1 << 20  # but no run longer than this


class Source:
    """One input: a file, a gzip file, a FIFO, or stdin.

    ``stream`` inputs (stdin, a FIFO such as ``<(zcat log.gz)``) can be read once only.
    """

    __slots__ = ("at", "consumed", "identity", "name", "path", "quiet", "stream")

    def __init__(self, name: str, path: str | None, *, stream: bool = False) -> None:
        self.name = name
        self.path = path  # None for stdin
        self.stream = stream or path is None
        self.consumed = 0  # bytes read so far; ``--follow`` continues from here
        self.identity: tuple[int, int] | None = None  # (st_dev, st_ino) of what was read
        self.quiet = False  # a worker that is not the first: another one says what happened to the file
        self.at = -1  # the file offset of the block last yielded; -1: not the file's bytes as they are

    def __getstate__(self) -> tuple[Any, ...]:
        return tuple(getattr(self, k) for k in self.__slots__)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for k, v in zip(self.__slots__, state, strict=True):
            setattr(self, k, v)

    @property
    def followable(self) -> bool:
        return self.path is not None and not self.stream and not self.path.endswith(".gz")

    def size(self) -> int:
        try:
            return os.path.getsize(self.path) if self.path and not self.stream else 0
        except OSError:
            return 0

    def blocks(self, read_size: int = _BLOCK) -> Iterator[Any]:
        """Buffers that each end on a line boundary (the last may lack its newline).

        Read ``read_size`` bytes at a time.
        """
        if self.path is None:
            stdin = sys.stdin.buffer
            if is_gzip(stdin):
                with gzip.GzipFile(fileobj=stdin) as gz:
                    yield from stream_blocks(gz, self.name, read_size)
            else:
                yield from stream_blocks(stdin, self.name, read_size)
            return
        with open(self.path, "rb") as fh:
            st = os.fstat(fh.fileno())
            self.identity = (st.st_dev, st.st_ino)
            if is_gzip(fh):
                with gzip.GzipFile(fileobj=fh) as gz:
                    yield from stream_blocks(gz, self.name, read_size)
                return
            yield from self._file_blocks(
                fh, st.st_size if stat.S_ISREG(st.st_mode) else None, min(read_size, _FILE_BLOCK)
            )

    def _file_blocks(self, fh: BinaryIO, size: int | None, read_size: int) -> Iterator[bytes]:
        """The blocks of a file as it was when opened (``size``; None: a FIFO, read to its end).

        Read, not mapped: a mapped file that shrinks (logrotate's ``copytruncate``,
        ``: > app.log``) kills the process with SIGBUS where it touches the lost pages;
        a read just comes back short, and the command ends with what it had and a note.
        What is appended meanwhile is left for ``--follow``, as a map would leave it.
        """
        lines = LineBlocks(self.name)
        got = offset = 0
        while size is None or got < size:
            n, blocks, error = lines.read(fh, read_size if size is None else min(read_size, size - got))
            got += n
            for block in blocks:
                self.consumed += len(block)  # ``--follow`` goes on from the last whole line
                self.at = -1 if lines.altered or size is None else offset  # a FIFO cannot be read again
                offset += len(block)
                yield block
            if error is not None:
                print(f"cvdiag: {self.name}: read error after {got} bytes ({error})", file=sys.stderr)
                break
            if not n:
                if size is not None:  # the rest is gone: so is the end of the line it cut
                    lines.carry = b""
                    if not self.quiet:
                        print(
                            f"cvdiag: {self.name} shrank while it was read (truncated or rotated): "
                            f"read {got} of its {size} bytes",
                            file=sys.stderr,
                        )
                break
        for block in lines.end():
            self.at = -1 if lines.altered or size is None else offset
            yield block

    def lines_at(
        self, blocks: list[tuple[int, list[tuple[int, int, Any]]]]
    ) -> Iterator[tuple[bytes, int, list[tuple[int, int, Any]]]]:
        """Lines of this plain file read again where they are: ``blocks`` are (a block's
        file offset, its lines (start, end, tag) in order), in file order; each comes out
        as (bytes read, shift, lines), a line at ``bytes[start - shift:end - shift]``.
        Lines closer together than ``_RUN_GAP`` share one ``pread``, so a pass that needs
        a few lines of a big file copies about those, not the whole file again. A line
        the file no longer holds (it shrank, or is gone) falls past the bytes read."""
        assert self.path is not None  # only a file whose blocks had offsets
        try:
            fh = open(self.path, "rb", buffering=0)  # noqa: SIM115 (closed below, even when the reader stops early)
        except OSError:
            fh = None
        try:
            for offset, lines in blocks:
                first, n = 0, len(lines)
                while first < n:
                    start, end = lines[first][0], lines[first][1]
                    k = first + 1
                    while k < n and lines[k][0] - end <= _RUN_GAP and end - start <= _RUN_MAX:
                        end = max(end, lines[k][1])  # a split line's records may span the next line
                        k += 1
                    yield _pread(fh, end - start, offset + start), start, lines[first:k]
                    first = k
        finally:
            if fh is not None:
                fh.close()

    def tail(self, n: int) -> bytes:
        """The last ``n`` bytes of a plain file (empty for streams and .gz): where a log ends."""
        if self.path is None or self.stream:
            return b""
        try:
            with open(self.path, "rb") as fh:
                if is_gzip(fh):
                    return b""
                size = os.fstat(fh.fileno()).st_size
                return os.pread(fh.fileno(), n, max(0, size - n))
        except OSError:
            return b""


_OWN_PROCESS = False  # reuse_block_memory was called: the process is cvdiag's alone


def reuse_block_memory() -> bool:
    """Has the C allocator keep blocks of this size for the next one rather than map each
    afresh (a third of the time of reading a big file, in page faults); whether it could.
    Only for a process that is cvdiag's alone, the CLI: it changes how the process
    allocates, so a library call never does it."""
    global _OWN_PROCESS
    from cvdiag.read._compiled import CFOLD

    _OWN_PROCESS = True
    return CFOLD is not None and CFOLD.reuse_block_memory()


def own_process() -> bool:
    """Whether ``reuse_block_memory`` made this process cvdiag's (the CLI's): only then may
    a pass change how the process allocates or collects."""
    return _OWN_PROCESS


def release_free_memory() -> None:
    """Hands the heap's free pages back to the system after a big pass (tens of MB that the
    RSS would keep), in a process that ``reuse_block_memory`` made cvdiag's; else nothing."""
    from cvdiag.read._compiled import CFOLD

    if _OWN_PROCESS and CFOLD is not None:
        CFOLD.release_free_memory()


def _pread(fh: BinaryIO | None, n: int, offset: int) -> bytes:
    """``n`` bytes at ``offset`` of ``fh``, fewer past its end, none where it cannot be read."""
    if fh is None:
        return b""
    try:
        return os.pread(fh.fileno(), n, offset)
    except OSError:
        return b""


def is_gzip(fh: Any) -> bool:
    """Whether the buffered binary input ``fh`` is gzip data, without consuming any of it.

    By magic bytes, not by name: ``cat x.gz | cvdiag`` and misnamed files work too.
    """
    return fh.peek(2)[:2] == _GZIP_MAGIC


def _read_block(fh: BinaryIO, size: int) -> tuple[bytes, BaseException | None]:
    """Up to ``size`` bytes, and the error that ended the input early, if one did.

    A ``.gz`` is read in small pieces: a cut one raises on the read that meets the
    cut, and one big read would lose everything it had decompressed before it.
    """
    if not isinstance(fh, gzip.GzipFile):
        try:
            return fh.read(size), None
        except OSError as exc:
            return b"", exc
    parts: list[bytes] = []
    n = 0
    try:
        while n < size:
            part = fh.read1(size - n)
            if not part:
                break
            parts.append(part)
            n += len(part)
    except (EOFError, OSError, zlib.error) as exc:
        return b"".join(parts), exc
    return parts[0] if len(parts) == 1 else b"".join(parts), None


def stream_blocks(fh: BinaryIO, name: str, read_size: int = _BLOCK) -> Iterator[bytes]:
    """The blocks of a stream read to its end (a cut end becomes a placeholder line)."""
    lines = LineBlocks(name)
    while True:
        chunk, error = _read_block(fh, read_size)
        yield from lines.feed(chunk)
        if error is not None:
            print(f"cvdiag: {name} is cut: read what it held ({error})", file=sys.stderr)
            yield from lines.end(cut=True)
            return
        if not chunk:
            yield from lines.end()
            return


class LineBlocks:
    """Cuts a byte stream, fed in chunks, into blocks that end on a line boundary and
    not between the records of a split container line; no line is kept longer than
    ``MAX_LINE``: the rest of it is skipped as it streams by, so memory stays bounded
    whatever the input (an endless line is one malformed line)."""

    __slots__ = ("altered", "carry", "name", "skipping", "warned")

    def __init__(self, name: str) -> None:
        self.name = name
        self.altered = False  # a placeholder put in or bytes left out: the blocks are no longer the input's
        self.carry = b""  # the start of a line not complete yet
        self.skipping = False  # inside an over-long line: dropping bytes up to its newline
        self.warned = False

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        if self.skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                return
            self.skipping = False
            chunk = chunk[nl + 1 :]
        if not chunk:
            return
        buf = self.carry + chunk if self.carry else chunk
        end = buf.rfind(b"\n") + 1
        yield from self._cut(buf[:end], buf[end:])

    def read(self, fh: BinaryIO, size: int) -> tuple[int, Iterator[bytes], BaseException | None]:
        """(bytes read, the blocks they complete, the error that ended the input early) of
        up to ``size`` more bytes of a plain file: read after the carry into one new block
        where compiled (``_cfold.read_block``), else a chunk ``feed`` joins and cuts."""
        from cvdiag.read._compiled import CFOLD

        if CFOLD is None:
            chunk, error = _read_block(fh, size)
            return len(chunk), self.feed(chunk), error
        try:
            block, rest, n = CFOLD.read_block(fh, b"" if self.skipping else self.carry, size)
        except OSError as exc:
            return 0, iter(()), exc
        return n, self._cut(block, rest) if n else iter(()), None

    def _cut(self, block: bytes, rest: bytes) -> Iterator[bytes]:
        """The carry and a chunk, given already cut after their last newline (``block``,
        then ``rest``), as blocks: one that ends on a line boundary and not between the
        records of a split line, and no line kept longer than ``MAX_LINE``. Most often
        ``block`` is yielded as it is and ``rest`` carried, with no copy."""
        if self.skipping:  # the carry was left out: drop up to the over-long line's end
            nl = block.find(b"\n")
            if nl < 0:
                return
            self.skipping = False
            block = block[nl + 1 :]
        end = len(block)
        if len(rest) > MAX_LINE:  # the last line is longer than any line kept
            self.carry, self.skipping, self.altered = b"", True, True
            self._warn()
            yield block + PLACEHOLDER_LONG + b"\n"
            return
        cut = rejoin.held_back(block, end) if end else 0
        if end + len(rest) - cut > MAX_LINE:  # never hold back more than a line's worth
            cut = end
        if cut == end:
            self.carry = rest
        else:
            self.carry, block = block[cut:] + rest, block[:cut]
        if cut:
            yield block

    def end(self, *, cut: bool = False) -> Iterator[bytes]:
        """The last block: the line still open (its newline never came), then the
        placeholder of a cut input."""
        carry, self.carry = self.carry, b""
        if cut:
            yield carry + (b"\n" if carry else b"") + PLACEHOLDER_CUT + b"\n"
        elif carry:
            yield carry

    def _warn(self) -> None:
        """Says so at once: on an endless input no end-of-run note would ever come."""
        if not self.warned:
            self.warned = True
            print(f"cvdiag: {self.name}: a {TOO_LONG}; skipping to its end", file=sys.stderr)


class InputError(Exception):
    """A path that cannot be read; the CLI reports it and exits 1."""


def resolve_sources(paths: Iterable[str]) -> list[Source]:
    """Files as given, directories walked recursively in name order, ``-`` for stdin.

    Inside a directory only regular files are read: a FIFO would block forever, a
    device never ends, a dangling symlink (a deleted pod's log) cannot be opened; each
    is skipped with a note. Named on the command line, a FIFO or socket is read as a
    stream (process substitution hands one over); a device is refused.
    """
    sources: list[Source] = []
    for p in paths:
        if p == "-":
            sources.append(Source("<stdin>", None))
        elif os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for f in sorted(files):
                    path = os.path.join(root, f)
                    why = _not_readable(path, inside_directory=True)
                    if why is None:
                        sources.append(Source(path, path))
                    else:
                        print(f"cvdiag: skipped {path}: {why}", file=sys.stderr)
        else:
            why = _not_readable(p, inside_directory=False)
            if why is not None:
                raise InputError(f"cannot read {p}: {why}")
            sources.append(Source(p, p, stream=not stat.S_ISREG(os.stat(p).st_mode)))
    return sources


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))  # fmt: skip


def _not_readable(path: str, *, inside_directory: bool) -> str | None:
    """Why ``path`` is not read, or None when it is."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a broken symbolic link" if os.path.islink(path) else "no such file or directory"
    except OSError as exc:
        return exc.strerror or str(exc)
    if stat.S_ISREG(mode):
        return None if os.access(path, os.R_OK) else "permission denied"
    for test, kind in _KINDS:
        if test(mode):
            if inside_directory:
                return f"{kind}, not a regular file"
            if kind.endswith("device"):
                return f"{kind}, not a log file"
            return None
    return "not a regular file"
