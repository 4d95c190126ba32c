"""The dynamic oracle: run a command (a test suite) under a call tracer and map what ran to graph nodes.

A small bootstrap script, written to a temporary directory (never into the workspace), installs a
`sys.setprofile`/`threading.setprofile` hook and then runs the command's module (`python -m pytest
...`) or script in the same interpreter. The hook records (caller code, callee code) pairs where both
code objects come from files under the workspace root, and writes them as JSON when the process
exits. Nothing is traced in subprocesses the command starts.

Code objects map to node ids by file and first line: `co_firstlineno` of a decorated def is the line
of its first decorator, which is `Node.start_line`; the `def` line (`extract.Def.line`) is the
fallback. Comprehensions and lambdas (their own code objects on 3.11) map to the innermost def that
lexically holds them, which is where the extractor files their call sites too.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ctx_lsp.index.facts import FileFacts
from ctx_lsp.index.model import python_qualname, symbol_id

CO_OPTIMIZED = 0x0001  # set on function code; module and class bodies lack it
CO_GENERATOR = 0x0020
CO_COROUTINE = 0x0080
CO_ASYNC_GENERATOR = 0x0200
SYNTHETIC = ("<lambda>", "<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")

BOOTSTRAP = r'''
import atexit, json, os, runpy, sys, threading

OUT, ROOT = sys.argv[1], os.path.realpath(sys.argv[2])
PREFIX = ROOT + os.sep
cache = {}
pairs = {}

def key_of(code):
    k = cache.get(code)
    if k is None:
        fn = code.co_filename
        if fn.startswith("<"):  # <frozen ...>, <string>: not a file of the workspace
            cache[code] = False
            return False
        if not os.path.isabs(fn):
            fn = os.path.abspath(fn)
        fn = os.path.realpath(fn) if os.path.islink(fn) else fn
        qual = getattr(code, "co_qualname", code.co_name)
        k = (fn, code.co_firstlineno, code.co_name, code.co_flags, qual) if fn.startswith(PREFIX) else False
        cache[code] = k
    return k

active = {}  # id(frame) of a workspace frame -> builtin (C) calls it is inside of

def prof(frame, event, arg):
    if event == "call":
        callee = key_of(frame.f_code)
        if callee is False:
            return
        back = frame.f_back
        if back is None:
            return
        caller = key_of(back.f_code)
        if caller is False:
            return
        # a callee entered while its caller sits in a builtin (sorted(key=f), io, map) was not called
        # by a call expression of the caller
        p = (caller, callee, id(back) in active)
        pairs[p] = pairs.get(p, 0) + 1
    elif event == "c_call":
        if key_of(frame.f_code) is not False:
            i = id(frame)
            active[i] = active.get(i, 0) + 1
    elif event == "c_return" or event == "c_exception":
        i = id(frame)
        n = active.get(i)
        if n is not None:
            if n <= 1:
                del active[i]
            else:
                active[i] = n - 1
    elif event == "return":
        active.pop(id(frame), None)

def dump():
    sys.setprofile(None)
    threading.setprofile(None)
    with open(OUT, "w", encoding="utf-8") as fh:
        for (a, b, via), n in pairs.items():
            fh.write(json.dumps([list(a), list(b), n, via]) + "\n")

atexit.register(dump)
args = sys.argv[3:]
threading.setprofile(prof)
sys.setprofile(prof)
try:
    if args and args[0] == "-m":
        sys.argv = [args[1]] + args[2:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(args)
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
        runpy.run_path(args[0], run_name="__main__")
finally:
    sys.setprofile(None)
'''


@dataclass(frozen=True, slots=True)
class CodeKey:
    path: str  # workspace-relative
    first_line: int
    name: str
    flags: int
    qualname: str = ""  # co_qualname (3.11+): "outer.<locals>.inner", "C.m"

    @property
    def is_function(self) -> bool:
        return bool(self.flags & CO_OPTIMIZED)

    @property
    def is_generator(self) -> bool:
        return bool(self.flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR))


@dataclass(frozen=True, slots=True)
class TracedCall:
    caller: CodeKey
    callee: CodeKey
    count: int
    via_builtin: bool = False  # the caller was inside a builtin (C) call when the callee started


@dataclass(slots=True)
class TraceRun:
    calls: list[TracedCall]
    returncode: int
    command: list[str]
    output_tail: str


def python_argv(cmd: str) -> list[str]:
    """The command after its interpreter: `python -m pytest -q` -> ['-m', 'pytest', '-q'].

    Only Python commands can be traced in-process; anything else is a usage error.
    """
    argv = shlex.split(cmd)
    if not argv:
        raise ValueError("empty --trace-cmd")
    exe = Path(argv[0]).name
    if exe.startswith("python"):
        argv = argv[1:]
    elif exe in ("pytest", "py.test"):
        argv = ["-m", "pytest", *argv[1:]]
    else:
        raise ValueError(f"--trace-cmd must run Python (python -m ..., python script.py, or pytest): {cmd!r}")
    if argv and argv[0] == "-m" and len(argv) >= 2 and argv[1] == "pytest" and "no:cacheprovider" not in argv:
        # pytest would write .pytest_cache into the workspace otherwise
        argv = argv[:2] + ["-p", "no:cacheprovider"] + argv[2:]
    if not argv or (argv[0] == "-m" and len(argv) < 2):
        raise ValueError(f"--trace-cmd has nothing to run: {cmd!r}")
    return argv


def run_traced(root: Path, cmd: str, work_dir: Path, timeout: float = 3600.0) -> TraceRun:
    """Run `cmd` in `root` under the tracer; files go to `work_dir` (never into `root`)."""
    root = root.resolve()
    argv = python_argv(cmd)
    work_dir.mkdir(parents=True, exist_ok=True)
    boot = work_dir / "ctx_trace_boot.py"
    boot.write_text(BOOTSTRAP, encoding="utf-8")
    out = work_dir / "trace.jsonl"
    if out.exists():
        out.unlink()
    env = dict(os.environ)
    # The workspace's own code must win over an installed copy of the same package.
    paths = [str(root / "src")] if (root / "src").is_dir() else []
    paths.append(str(root))
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # no __pycache__ inside the workspace
    full = [sys.executable, str(boot), str(out), str(root), *argv]
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace", dir=work_dir) as log:
        try:
            proc = subprocess.run(full, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = -9
        log.seek(0)
        tail = log.read()[-2000:]
    calls: list[TracedCall] = []
    if out.exists():
        prefix = str(root) + os.sep
        for raw in out.read_text(encoding="utf-8").splitlines():
            a, b, n, via = json.loads(raw)
            keys = []
            for fn, first, name, flags, qual in (a, b):
                rel = fn[len(prefix):].replace(os.sep, "/") if fn.startswith(prefix) else fn
                keys.append(CodeKey(rel, int(first), str(name), int(flags), str(qual)))
            calls.append(TracedCall(keys[0], keys[1], int(n), bool(via)))
    calls.sort(key=lambda c: (c.caller.path, c.caller.first_line, c.caller.qualname, c.callee.path,
                              c.callee.first_line, c.callee.qualname, c.via_builtin))
    return TraceRun(calls, rc, [Path(sys.executable).name, *argv], tail)


class CodeMapper:
    """Maps traced code objects to node ids using the extractor's facts."""

    def __init__(self, facts: Mapping[str, FileFacts]) -> None:
        self.facts = facts
        self.by_start: dict[tuple[str, int, str], str] = {}
        self.by_line: dict[tuple[str, int, str], str] = {}
        self.spans: dict[str, list[tuple[int, int, str, str]]] = {}
        self.known: set[str] = set()
        # a def defined again elsewhere has a node of its own, `name#2`: node id -> every node of its
        # name, as (start, end, node id)
        self.redefined: dict[str, list[tuple[int, int, str]]] = {}
        for path, f in facts.items():
            spans = []
            for d in f.defs:
                if d.kind == "variable":
                    continue
                name = d.qual.rsplit(".", 1)[-1]
                nid = symbol_id(path, d.qual)
                self.known.add(nid)
                if "#" in d.qual:
                    self.redefined.setdefault(symbol_id(path, python_qualname(d.qual)), []).append((d.start, d.end, nid))
                self.by_start.setdefault((path, d.start, name), nid)
                self.by_line.setdefault((path, d.line, name), nid)
                if d.kind != "class":
                    spans.append((d.start, d.end, nid, d.kind))
            self.spans[path] = spans

    def node_of(self, key: CodeKey) -> str | None:
        """The node id a code object belongs to; None for module/class bodies and unknown code.

        The qualified name decides first (`outer.<locals>.inner` is our `outer.inner`; a lambda or a
        comprehension belongs to the def holding it), so overloads, property setters and other
        branches, whose bodies the graph folds into the first def of that name, still map to that node;
        a redefinition with a node of its own (`name#2`) is the one whose lines hold the code's first
        line. Lines are the fallback (code without a usable qualname).
        """
        if key.path not in self.facts or not key.is_function:
            return None
        if key.qualname:
            parts = [p for p in key.qualname.split(".") if p != "<locals>"]
            while parts and parts[-1] in SYNTHETIC:
                parts.pop()
            if parts:
                nid = symbol_id(key.path, ".".join(parts))
                if nid in self.known:
                    return next((other for start, end, other in self.redefined.get(nid, ())
                                 if start <= key.first_line <= end), nid)
        if key.name in SYNTHETIC:
            return self.innermost(key.path, key.first_line)
        found = self.by_start.get((key.path, key.first_line, key.name))
        return found if found is not None else self.by_line.get((key.path, key.first_line, key.name))

    def innermost(self, path: str, line: int) -> str | None:
        best: tuple[int, str] | None = None
        for start, end, nid, _kind in self.spans.get(path, ()):
            if start <= line <= end and (best is None or end - start <= best[0]):
                best = (end - start, nid)
        return best[1] if best else None
