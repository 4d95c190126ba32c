"""Running the independent units of a batch: on Dask distributed when it is installed, else in process.

A unit is a module-level function (workers import it by name, so it must live in the package) with
picklable arguments, under a key that is unique and stable: callers order their outputs by that key,
never by completion order. A unit that raises is retried once, then reported as failed with its
error while the others run on. One progress line per finished unit goes to `log` (stderr).
Ctrl-C cancels the submitted futures and closes the cluster before the KeyboardInterrupt goes up.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

RETRIES = 1
INSTALL_HINT = "pip install 'ctx-lsp[batch]'"


class SchedulerUnreachable(RuntimeError):
    pass


@dataclass(frozen=True)
class Unit:
    key: str
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    weight: int = 0  # expected cost: heavier units start first, so the longest one does not start last


@dataclass(frozen=True)
class Outcome:
    key: str
    value: Any = None
    error: str | None = None  # "ExceptionType: message" of the last attempt

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Scheduler:
    """Where units run: `serial` (in this process, in key order), `local` (a LocalCluster of
    `workers` processes) or `remote` (the Dask scheduler at `address`)."""

    kind: str
    workers: int = 1
    address: str = ""

    def describe(self) -> str:
        if self.kind == "local":
            return f"a local Dask cluster of {self.workers} worker process(es)"
        if self.kind == "remote":
            return f"the Dask scheduler at {self.address}"
        return "this process, one unit after another"


def parse_scheduler(spec: str | None) -> Scheduler:
    """`local` (the default: one worker process per core), `local:N`, a scheduler address such as
    `tcp://HOST:8786`, or `serial`. Raises ValueError on anything else."""
    spec = (spec or "local").strip()
    if spec == "serial":
        return Scheduler("serial")
    if spec == "local":
        return Scheduler("local", os.cpu_count() or 1)
    if spec.startswith("local:"):
        n = spec.split(":", 1)[1]
        if not n.isdigit() or int(n) < 1:
            raise ValueError(f"--scheduler {spec!r}: expected local:N with N >= 1")
        return Scheduler("local", int(n))
    if "://" in spec and spec.split("://", 1)[1]:
        return Scheduler("remote", address=spec)
    raise ValueError(f"--scheduler {spec!r}: expected local, local:N, serial or a scheduler address (tcp://HOST:PORT)")


def dask_available() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


def resolve(sched: Scheduler, log: TextIO) -> Scheduler:
    """`sched`, or serial with a note when dask is missing; a remote scheduler needs dask (ValueError)."""
    if sched.kind == "serial" or dask_available():
        return sched
    if sched.kind == "remote":
        raise ValueError(f"--scheduler {sched.address} needs Dask distributed: {INSTALL_HINT}")
    print(f"batch: Dask distributed is not installed ({INSTALL_HINT}); running the units in this process, "
          "one after another", file=log, flush=True)
    return Scheduler("serial")


Finish = Callable[[str, Any], Any]


def run_units(units: Sequence[Unit], sched: Scheduler, finish: Finish | None = None, log: TextIO | None = None,
              describe: Callable[[Any], str] | None = None, worker_memory: str = "auto") -> list[Outcome]:
    """Every unit's outcome, in key order.

    `finish(key, value)` runs here, on the driver, as each unit finishes (it writes the unit's outputs);
    what it returns is kept as the outcome's value, and an exception in it fails the unit.
    `describe(kept value)` adds a few words to the unit's progress line.
    """
    log = log or sys.stderr
    keys = [u.key for u in units]
    if len(set(keys)) != len(keys):
        raise ValueError("batch units need distinct keys")
    progress = _Progress(len(units), log, finish, describe)
    if sched.kind == "serial":
        outcomes = [progress.done(_run_here(u)) for u in sorted(units, key=lambda u: u.key)]
    else:
        outcomes = _run_on_dask(units, sched, progress, worker_memory, log)
    return sorted(outcomes, key=lambda o: o.key)


class _Progress:
    def __init__(self, total: int, log: TextIO, finish: Finish | None, describe: Callable[[Any], str] | None) -> None:
        self.total, self.log, self.finish, self.describe = total, log, finish, describe
        self.count = 0
        self.t0 = time.perf_counter()

    def done(self, o: Outcome) -> Outcome:
        if o.ok and self.finish is not None:
            try:
                o = Outcome(o.key, self.finish(o.key, o.value))
            except Exception as exc:  # e.g. the output directory is full: this unit fails, not the batch
                o = Outcome(o.key, error=f"writing its outputs: {_error(exc)}")
        self.count += 1
        what = f"FAILED {o.error}" if o.error else ("ok" + (f" {self.describe(o.value)}" if self.describe else ""))
        print(f"[{self.count}/{self.total}] {o.key} {what} ({time.perf_counter() - self.t0:.1f}s)",
              file=self.log, flush=True)
        return o


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _run_here(u: Unit) -> Outcome:
    err = ""
    for _ in range(1 + RETRIES):
        try:
            return Outcome(u.key, u.fn(*u.args))
        except Exception as exc:  # a failing unit is reported, the batch goes on
            err = _error(exc)
    return Outcome(u.key, error=err)


def _run_on_dask(units: Sequence[Unit], sched: Scheduler, progress: _Progress, worker_memory: str,
                 log: TextIO) -> list[Outcome]:
    from distributed import Client, LocalCluster, as_completed

    cluster = None
    if sched.kind == "local":
        # a free port: two batches on one machine must not fight over 8787
        # workers' own logs stay quiet: a failed unit's error is reported once, on its progress line
        cluster = LocalCluster(n_workers=sched.workers, threads_per_worker=1, processes=True,
                               memory_limit=worker_memory, dashboard_address=":0", silence_logs=logging.CRITICAL)
        client = Client(cluster)
        # the scheduler serves its HTTP routes either way; the dashboard pages need bokeh
        has_dashboard = importlib.util.find_spec("bokeh") is not None
    else:
        try:
            client = Client(sched.address)
        except (OSError, TimeoutError) as exc:
            raise SchedulerUnreachable(f"cannot reach the Dask scheduler at {sched.address}: {exc}") from exc
        has_dashboard = "dashboard" in client.scheduler_info().get("services", {})
    futures: dict[Any, Unit] = {}
    try:
        if has_dashboard and client.dashboard_link:
            print(f"batch: Dask dashboard at {client.dashboard_link}", file=log, flush=True)
        # heaviest first: idle workers take tasks as they arrive, before a later priority could count
        for u in sorted(units, key=lambda u: (-u.weight, u.key)):
            futures[client.submit(u.fn, *u.args, retries=RETRIES, pure=False, priority=u.weight)] = u
        print(f"batch: {len(futures)} units submitted", file=log, flush=True)
        outcomes = []
        for fut in as_completed(list(futures)):
            u = futures[fut]
            if fut.status == "finished":
                o = Outcome(u.key, fut.result())
            elif fut.status == "error":
                o = Outcome(u.key, error=_error(fut.exception()))
            else:  # cancelled from elsewhere (another client, a scheduler restart)
                o = Outcome(u.key, error=f"the task was {fut.status}")
            fut.release()  # the driver holds the value now; workers may drop it
            outcomes.append(progress.done(o))
        return outcomes
    except KeyboardInterrupt:
        client.cancel(list(futures), force=True)
        raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
