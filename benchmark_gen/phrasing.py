"""The three phrasings of a question about a target symbol, and the mechanical leak check.

(1) `qualified`: the dotted module path plus the qualified name.
(2) `short`: the short name plus the file that defines it.
(3) `nameless`: a description built from the docstring, the signature's shape and the location, which
    contains no identifier of the target and none of its identifier sub-words. Every piece of the
    description is checked on its own (a leaking piece is left out) and the finished question is
    checked again; a question that still leaks, or that has no docstring sentence left to identify
    the target, is dropped.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from benchmark_gen.common import leaks, subwords, words
from ctx_lsp.index.model import Node

# Questions per relation. `{t}` is the target phrase; kind-specific variants keep the English right.
TEMPLATES: dict[str, dict[str, str]] = {
    # the wording of the issue that specifies the benchmark ("who calls X", "what must change if X's
    # signature changes", "what changed in X recently"); paraphrases are a separate experiment
    "callers": {"*": "Who calls {t}?"},
    "callees": {"*": "What does {t} call?"},
    "implementations": {"class": "Which classes subclass {t}?", "*": "Which methods override {t}?"},
    "references": {"*": "Where is {t} referenced?"},
    "importers": {"*": "Which files import {t}?"},
    "instantiations": {"*": "Where is {t} instantiated?"},
    "impact": {"*": "What must change if the signature of {t} changes?"},
    "tests": {"*": "Which tests cover {t}?"},
    "history": {"*": "What changed in {t} recently?"},
}

KIND_WORD = {"class": "class", "function": "function", "method": "method", "test": "test function",
             "variable": "variable"}
NUMBERS = ["no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def template(relation: str, kind: str) -> str:
    t = TEMPLATES.get(relation, {"*": f"What is related to {{t}} by {relation}?"})
    return t.get(kind, t["*"])


def forbidden_words(node: Node) -> set[str]:
    """The identifier sub-words a nameless phrasing must avoid: every part of the qualified name."""
    out: set[str] = set()
    for part in (node.qualname or "").split("."):
        out.update(subwords(part))
        low = part.lower().strip("_")
        if low:
            out.add(low)
    return out


@dataclass
class DefInfo:
    """What the nameless phrasing knows about a definition, read from the syntax tree."""

    doc: str
    params: int
    varargs: bool
    returns: str | None
    is_async: bool
    bases: int


def def_infos(text: str) -> dict[str, DefInfo]:
    """Docstrings and signature shapes of every class/function in a file, by qualified name."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    out: dict[str, DefInfo] = {}

    def visit(body: list[ast.stmt], prefix: str, in_class: bool) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = f"{prefix}.{node.name}" if prefix else node.name
                doc = ast.get_docstring(node) or ""
                if isinstance(node, ast.ClassDef):
                    info = DefInfo(doc, 0, False, None, False, len(node.bases))
                else:
                    a = node.args
                    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
                    if in_class and names and names[0] in ("self", "cls"):
                        names = names[1:]
                    ret = None
                    if node.returns is not None:
                        try:
                            ret = ast.unparse(node.returns)
                        except (ValueError, RecursionError):
                            ret = None
                    info = DefInfo(doc, len(names), bool(a.vararg or a.kwarg), ret,
                                   isinstance(node, ast.AsyncFunctionDef), 0)
                out.setdefault(qual, info)
                visit(node.body, qual, isinstance(node, ast.ClassDef))
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                # definitions under `if TYPE_CHECKING:` / try-import fallbacks keep their plain names
                for sub in (getattr(node, "body", []), getattr(node, "orelse", []), getattr(node, "finalbody", [])):
                    visit(sub, prefix, in_class)
                for h in getattr(node, "handlers", []):
                    visit(h.body, prefix, in_class)

    visit(tree.body, "", False)
    return out


_ROLE = re.compile(r":[a-z:]+:`~?([^`<]*?)\s*(?:<[^>]*>)?`")
_LITERAL = re.compile(r"``([^`]*)``")


def doc_sentences(doc: str) -> list[str]:
    """Sentences of a docstring's prose (first paragraphs; reST field lists and examples dropped)."""
    prose: list[str] = []
    doc = _LITERAL.sub(r"\1", _ROLE.sub(r"\1", doc))
    for para in re.split(r"\n\s*\n", doc.strip()):
        first = para.strip()
        if not first or first.startswith((":", ">>>", "..", "@", "Example", "Usage")) or "::" in first:
            break
        prose.append(" ".join(line.strip() for line in para.splitlines()))
        if len(prose) >= 2:
            break
    out: list[str] = []
    for para in prose:
        for s in _SENTENCE.split(para):
            s = s.strip()
            # a whole sentence only: it starts with a capital and its brackets balance
            whole = s[:1].isupper() and s.count("(") == s.count(")") and s.count("[") == s.count("]")
            if whole and 4 <= len(words(s)) <= 40 and "`" not in s and ">>>" not in s:
                out.append(s)
    return out


def _returns_phrase(ret: str | None, forbidden: set[str]) -> str:
    if not ret or ret == "None":
        return ""
    phrase = f"returns {ret.split('[', 1)[0].rsplit('.', 1)[-1]}"
    return "" if leaks(phrase, forbidden) else phrase


def mask(sentence: str, forbidden: set[str]) -> str | None:
    """The sentence with each leaking word replaced by "...", or None when too little is left.

    At most a third of its words may be masked and at least three unmasked words of four letters or
    more must remain, so the sentence still says what the target does.
    """
    parts = re.split(r"([A-Za-z0-9_.\-]+)", sentence)
    masked = 0
    total = 0
    kept: list[str] = []
    for i, part in enumerate(parts):
        if i % 2 == 1:
            total += 1
            if leaks(part, forbidden):
                masked += 1
                kept.append("...")
                continue
        kept.append(part)
    text = "".join(kept)
    content = [w for w in words(text) if len(w) >= 4]
    if masked == 0:
        return text
    if masked * 3 > total or len(content) < 3:
        return None
    return text


def describe(node: Node, info: DefInfo | None, forbidden: set[str]) -> str | None:
    """A nameless description of `node`, or None when no non-leaking docstring sentence exists.

    A docstring sentence that names the target is used with the naming words masked ("...") when
    enough of it is left (see `mask`); a clean sentence is preferred.
    """
    if info is None:
        return None
    sentences = doc_sentences(info.doc)
    sentence = next((s for s in sentences if not leaks(s, forbidden)), None)
    if sentence is None:
        sentence = next((m for s in sentences if (m := mask(s, forbidden)) is not None), None)
    if sentence is None:
        return None
    kind = KIND_WORD.get(node.kind, node.kind)
    head = f"the {'async ' if info.is_async else ''}{kind}"
    if node.kind == "method":
        head += " of a class"
    # location: the file when its words do not leak, else its directory, else the package root
    parts = node.path.split("/")
    for loc in ("/".join(parts), "/".join(parts[:-1])):
        if loc and not leaks(loc, forbidden):
            head += f" in {loc}" if loc.endswith(".py") else f" under {loc}/"
            break
    shape: list[str] = []
    if node.kind in ("function", "method", "test"):
        n = info.params
        shape.append("takes " + (NUMBERS[n] if n < len(NUMBERS) else str(n)) + (" parameter" if n == 1 else " parameters")
                     + (" plus variadic ones" if info.varargs else ""))
        ret = _returns_phrase(info.returns, forbidden)
        if ret:
            shape.append(ret)
    elif node.kind == "class" and info.bases:
        shape.append("has a base class" if info.bases == 1 else f"has {NUMBERS[min(info.bases, 10)]} base classes")
    text = head
    if shape:
        text += " that " + " and ".join(shape)
    if sentence.endswith(".") and not sentence.endswith("..."):
        sentence = sentence[:-1]
    text += f', documented as "{sentence}"'
    return text


def phrasings(node: Node, module: str, relation: str, info: DefInfo | None) -> list[tuple[str, str]]:
    """[(phrasing, question)] for one target; the nameless one is absent when it cannot be made safe."""
    tmpl = template(relation, node.kind)
    out = [
        ("qualified", tmpl.format(t=f"`{module}.{node.qualname}`")),
        ("short", tmpl.format(t=f"`{node.name}` in `{node.path}`")),
    ]
    forbidden = forbidden_words(node)
    desc = describe(node, info, forbidden)
    if desc is not None:
        question = tmpl.format(t=desc)
        if not leaks(question, forbidden):
            out.append(("nameless", question))
    return out
