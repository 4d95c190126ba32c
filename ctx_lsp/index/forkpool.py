"""Worker processes forked straight from the indexer, mapping one function over a list of tasks.

Why not multiprocessing's fork pool: its child runs start-up and exit code of its own (it closes
`sys.stdin`, runs after-fork hooks, flushes `sys.stdout` and `sys.stderr`, joins queue threads). In a
process with threads (the language server: a thread reads the LSP wire, another logs, jedi runs in a
third) any of those can block forever on a lock another thread held at the fork. So the language
server bound every file in one process and sent its extraction workers the old facts through a
forkserver: a Django cold index took 9 s there against 7.5 s forked, a checkout 3 s against 2.4 s.

A child here runs the task function and nothing else: tasks and the function are inherited at the
fork (not pickled), results go back pickled through the child's own pipe, and it leaves with
`os._exit`, never touching a standard stream (logging and warnings are off in it when the parent had
threads). What the function reads must need no lock another thread can hold: the indexer's
extraction and binding only read their inherited data. Should a child still hang or die, the parent
notices (no result for `stall` seconds, or the child's pipe closing early), kills the children and
raises ForkPoolError; callers then do the work in process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import selectors
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

STALL_SECONDS = 60.0  # no result from any child for this long: assume one hangs (a chunk takes ~1 s)
PIPE_BYTES = 1 << 20  # the default most a user may ask for (/proc/sys/fs/pipe-max-size)
_LEN = 8  # bytes of a result frame's length prefix
_TASK = 4  # bytes of a task index


class ForkPoolError(RuntimeError):
    """The children could not finish (one died, hung, or could not be forked); the work is undone."""


class ForkPool(Generic[T, R]):
    """`fn` over `tasks` in `workers` forked children, results in task order (`results()`).

    The children are forked when the pool is made, so work the caller starts after that (a thread)
    is not inherited by them. Each child is handed one task more than it is working on, so none
    waits for the parent between tasks. Use as a context manager: leaving it early kills the children.
    """

    def __init__(self, fn: Callable[[T], R], tasks: Sequence[T], workers: int, stall: float = STALL_SECONDS,
                 reap_later: bool = False) -> None:
        """`reap_later`: a child that finished its tasks is reaped by a later pool (or at its next
        close) rather than waited for here: a child of a large indexer takes 10-20 ms to exit (its
        address space torn down), which an update need not wait for."""
        if not hasattr(os, "fork"):
            raise ForkPoolError("this platform cannot fork")
        reap_exited()
        self._fn, self._tasks, self._stall, self._reap_later = fn, tasks, stall, reap_later
        self._next = 0  # the next task to hand out
        self._children: list[_Child] = []
        try:
            for _ in range(max(1, min(workers, len(tasks)))):
                self._children.append(self._fork())
        except OSError as exc:
            self.close()
            raise ForkPoolError(f"could not fork a worker: {exc}") from exc
        for child in self._children:
            for _ in range(2):
                self._hand_out(child)

    def __enter__(self) -> ForkPool[T, R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _fork(self) -> _Child:
        import fcntl  # POSIX only, as fork

        task_r, task_w = os.pipe()
        result_r, result_w = os.pipe()
        if hasattr(fcntl, "F_SETPIPE_SZ"):  # Linux: a result (a chunk's packed facts) fits without waiting for a read
            with contextlib.suppress(OSError):
                fcntl.fcntl(result_w, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        try:
            pid = fork_quiet()
        except OSError:
            for fd in (task_r, task_w, result_r, result_w):
                os.close(fd)
            raise
        if pid == 0:  # the child: never returns
            code = 0
            try:
                os.close(task_w)
                os.close(result_r)
                for other in self._children:  # the other children's pipes: their ends must close with them
                    other.close_fds()
                self._serve(task_r, result_w)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(task_r)
        os.close(result_w)
        return _Child(pid, task_w, result_r)

    def _serve(self, task_r: int, result_w: int) -> None:
        while True:
            raw = _read_exact(task_r, _TASK)
            if not raw:
                return  # the parent closed the task pipe: nothing more to do
            index = int.from_bytes(raw, "little")
            try:
                frame = pickle.dumps((index, True, self._fn(self._tasks[index])), pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:  # handed to the parent, which raises it
                frame = pickle.dumps((index, False, _picklable(exc)), pickle.HIGHEST_PROTOCOL)
            _write_all(result_w, len(frame).to_bytes(_LEN, "little") + frame)

    def _hand_out(self, child: _Child) -> None:
        if child.task_w < 0:
            return
        if self._next < len(self._tasks):
            try:
                os.write(child.task_w, self._next.to_bytes(_TASK, "little"))  # 4 bytes: never blocks
            except BrokenPipeError:  # the child died: results() reports how when its result pipe ends
                os.close(child.task_w)
                child.task_w, child.gone = -1, True
                return
            child.pending += 1
            self._next += 1
        else:
            os.close(child.task_w)
            child.task_w = -1

    def results(self) -> Iterator[R]:
        """The tasks' results in task order, as they come in."""
        done: dict[int, R] = {}
        want = 0
        with selectors.DefaultSelector() as sel:
            for child in self._children:
                sel.register(child.result_r, selectors.EVENT_READ, child)
            last = time.monotonic()
            while want < len(self._tasks):
                while want in done:
                    yield done.pop(want)
                    want += 1
                if want == len(self._tasks):
                    break
                events = sel.select(timeout=1.0)
                if not events:
                    if time.monotonic() - last > self._stall:
                        raise ForkPoolError(f"no worker finished a task in {self._stall:.0f} s")
                    continue
                for key, _ in events:
                    child = key.data
                    data = os.read(child.result_r, 1 << 20)
                    if not data:
                        sel.unregister(child.result_r)
                        if child.pending or child.gone:
                            raise ForkPoolError(f"worker {child.pid} ended with {child.pending} task(s) unfinished"
                                                f"{_exit_reason(child.pid)}")
                        continue
                    child.buf += data
                    for index, ok, value in child.frames():
                        last = time.monotonic()
                        child.pending -= 1
                        if not ok:
                            raise value
                        done[index] = value
                        self._hand_out(child)
        self.close()

    def close(self) -> None:
        """Stop the children (killed when they still have tasks) and reap them."""
        for child in self._children:
            if child.task_w >= 0:
                os.close(child.task_w)
                child.task_w = -1
            if child.pending:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGKILL)
            if self._reap_later and not child.pending:
                _EXITING.add(child.pid)  # it has answered everything and sees its task pipe closed: it ends
            else:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(child.pid, 0)
            if child.result_r >= 0:
                os.close(child.result_r)
                child.result_r = -1
        self._children = []
        reap_exited()


_EXITING: set[int] = set()  # children of `reap_later` pools not reaped yet


def reap_exited(wait: float = 0.0) -> None:
    """Reap the `reap_later` children that have exited, polling up to `wait` seconds for the rest."""
    deadline = time.monotonic() + wait
    while True:
        for pid in list(_EXITING):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (a SIGCHLD handler, os.wait)
                done = pid
            if done:
                _EXITING.discard(pid)
        if not _EXITING or time.monotonic() >= deadline:
            return
        time.sleep(0.002)


def fork_quiet() -> int:
    """`os.fork()` for a child that runs only the indexer's own code and leaves with `os._exit` (a
    ForkPool worker, the cache writer). Beside threads, logging and warnings are off in the child: a
    parent thread may hold a standard stream's lock (a SyntaxWarning from parsing the user's code
    would write to one)."""
    quiet = threading.active_count() > 1
    with warnings.catch_warnings():
        # Python 3.12+ warns on a fork beside threads: this child is built not to need their locks
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0 and quiet:
        logging.disable(logging.CRITICAL)
        warnings.simplefilter("ignore")
    return pid


class _Child:
    def __init__(self, pid: int, task_w: int, result_r: int) -> None:
        self.pid, self.task_w, self.result_r = pid, task_w, result_r
        self.pending = 0  # tasks handed to it and not yet answered
        self.gone = False  # a task could not be handed to it: it has died
        self.buf = bytearray()

    def close_fds(self) -> None:
        for fd in (self.task_w, self.result_r):
            if fd >= 0:
                os.close(fd)

    def frames(self) -> Iterator[tuple[int, bool, Any]]:
        """Complete result frames in the buffer, taken out of it."""
        while len(self.buf) >= _LEN:
            size = int.from_bytes(self.buf[:_LEN], "little")
            if len(self.buf) < _LEN + size:
                return
            frame = bytes(self.buf[_LEN : _LEN + size])
            del self.buf[: _LEN + size]
            yield pickle.loads(frame)


def _read_exact(fd: int, n: int) -> bytes:
    out = b""
    while len(out) < n:
        got = os.read(fd, n - len(out))
        if not got:
            if out:
                raise ForkPoolError("a task index was cut short")
            return b""
        out += got
    return out


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _exit_reason(pid: int, wait: float = 2.0) -> str:
    # A dying child's pipe reaches EOF before the kernel marks it exited (its files are closed first),
    # so poll briefly for its status instead of asking once.
    deadline = time.monotonic() + wait
    while True:
        try:
            reaped, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return ""
        if reaped or time.monotonic() >= deadline:
            break
        time.sleep(0.005)
    if reaped == 0:
        return ""
    if os.WIFSIGNALED(status):
        return f" (killed by signal {os.WTERMSIG(status)})"
    if os.WIFEXITED(status):
        return f" (exit status {os.WEXITSTATUS(status)})"
    return ""
