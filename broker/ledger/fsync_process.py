"""fsync in a small child process, so that its completion never waits for the event loop's GIL.

Why not a worker thread: a thread returning from ``os.fsync`` needs the GIL before it can report
back, and a busy event loop (uvloop releases the GIL only when it has nothing to do) gives it up
only when the interpreter forces a switch, every 5 ms. Measured on the proposal path at 32
connections: a thread's fsync cycle took about 7 ms, of which the fsync itself was well under
one, and every append waited for it; with this child the cycle is the disk's own time.

The child holds a copy of the ledger's descriptor (the same open file, so its fsync makes the
parent's writes durable) and does nothing else: for each byte it reads it calls ``fsync`` once
and answers one byte, 0 for success or the ``errno`` of the failure. It runs in a session of its
own (a Ctrl-C meant for the broker does not reach it) and exits when its stdin closes, which
includes the broker dying.
"""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
from collections import deque

__all__ = ["FsyncProcess"]

_CHILD = """\
import os, sys
fd = int(sys.argv[1])
while os.read(0, 1):
    try:
        os.fsync(fd)
        answer = 0
    except OSError as exc:
        answer = exc.errno if 0 < (exc.errno or 0) < 256 else 255
    os.write(1, bytes((answer,)))
"""


class FsyncProcess:
    """Runs ``fsync(fd)`` in a child process; started on the first call, restarted if it dies.

    Args:
        fd: the descriptor to make durable.
        name: the file's name, for errors.
    """

    def __init__(self, fd: int, *, name: str) -> None:
        self._fd = fd
        self._name = name
        self._child: subprocess.Popen[bytes] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._answers: deque[asyncio.Future[int]] = deque()
        """One per request sent and not yet answered, oldest first: the child answers in order,
        so a late answer to an abandoned request is never taken for the next one's."""

    @property
    def pid(self) -> int | None:
        """The child's process id while one runs."""
        return None if self._child is None else self._child.pid

    async def fsync(self) -> None:
        """Return once ``fsync(fd)`` succeeded in the child.

        Raises:
            OSError: the fsync failed (its errno), or the child could not be started or died.
        """
        loop = asyncio.get_running_loop()
        child = self._child if self._child is not None else self._start(loop)
        answer: asyncio.Future[int] = loop.create_future()
        assert child.stdin is not None  # noqa: S101 - started with a pipe
        try:
            os.write(child.stdin.fileno(), b"s")  # one byte into a pipe: never blocks
        except OSError as exc:
            self._lost(f"the fsync process for {self._name} is gone: {exc}")
            raise OSError(errno.EIO, f"the fsync process for {self._name} is gone") from exc
        self._answers.append(answer)
        code = await answer
        if code:
            raise OSError(code, os.strerror(code))

    def _start(self, loop: asyncio.AbstractEventLoop) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(  # noqa: S603 - our own interpreter running our own code
            [sys.executable, "-I", "-S", "-c", _CHILD, str(self._fd)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=(self._fd,),
            start_new_session=True,
        )
        assert child.stdout is not None  # noqa: S101 - started with a pipe
        os.set_blocking(child.stdout.fileno(), False)
        loop.add_reader(child.stdout.fileno(), self._on_answers)
        self._child, self._loop = child, loop
        return child

    def _on_answers(self) -> None:
        assert self._child is not None and self._child.stdout is not None  # noqa: S101
        try:
            answers = os.read(self._child.stdout.fileno(), 4096)
        except BlockingIOError:
            return
        except OSError as exc:
            self._lost(f"the fsync process for {self._name} cannot be read: {exc}")
            return
        if not answers:
            self._lost(f"the fsync process for {self._name} exited")
            return
        for code in answers:
            if not self._answers:
                break  # pragma: no cover - the child answers only what it was asked
            future = self._answers.popleft()
            if not future.done():
                future.set_result(code)

    def _lost(self, reason: str) -> None:
        """The child died or its pipe broke: fail what it owed, start afresh on the next call."""
        self._stop()
        while self._answers:
            future = self._answers.popleft()
            if not future.done():
                future.set_exception(OSError(errno.EIO, reason))

    def _stop(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        if self._loop is not None and child.stdout is not None and not self._loop.is_closed():
            self._loop.remove_reader(child.stdout.fileno())
        for pipe in (child.stdin, child.stdout):
            if pipe is not None:
                pipe.close()  # the child reads end-of-file and exits
        try:
            child.wait(timeout=1.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - stuck in the kernel's fsync
            child.kill()
            child.wait()

    def close(self) -> None:
        """Stop the child (after the caller's last fsync has returned); idempotent."""
        self._lost(f"the fsync process for {self._name} was closed")
