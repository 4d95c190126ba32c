"""Understand: a deterministic, rule-based planner from text to a Plan.

A Plan has a trigger (EXPLICIT_SYMBOL, SEMANTIC_CONCEPT, TEMPORAL_HISTORY, IMPLICIT_CONTEXT), the
things mentioned (identifiers, dotted paths, file paths, quoted strings, error messages), relation
operators, and the concept words left once those are removed. Instructions ("Make the retry count
configurable") are impact queries on what they name or describe.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ctx_lsp.retrieval.evidence import PROSE_ABBREVIATIONS, blank_urls, is_task_text, linked_paths
from ctx_lsp.retrieval.text import STOPWORDS

EXPLICIT_SYMBOL = "EXPLICIT_SYMBOL"
SEMANTIC_CONCEPT = "SEMANTIC_CONCEPT"
TEMPORAL_HISTORY = "TEMPORAL_HISTORY"
IMPLICIT_CONTEXT = "IMPLICIT_CONTEXT"

OPERATORS = ("definition", "callers", "callees", "implementations", "references", "importers", "dependencies",
             "instantiations", "tests", "history", "impact")

# (operator, pattern) in priority order; patterns run on the lower-cased query
_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("callers", re.compile(r"\b(?:who|what(?: code| functions?| methods?)?|which \w+) (?:calls|uses|invokes|triggers)\b|\bcallers?\b|\bcalled (?:by|from)\b|\bcall sites?\b|\b(?:where|how) (?:is|are) .* (?:called|invoked|used)\b|\binvocations? of\b|\binvok\w* (?:of|it)\b")),
    ("callees", re.compile(r"\bwhat (?:does|do) .* (?:call|invoke|use)\b|\bcallees?\b|\bcalls made (?:by|in|from)\b|\bfunctions? (?:called|invoked) (?:by|in|from)\b|\bwhat .* calls? into\b")),
    # "implements", "implementations of", "which classes implement X"; never "where is X implemented"
    # or "how do I implement X", which ask where the code is
    ("implementations", re.compile(r"\bimplement(?:s|ations?|ers?|ing)\b|\b(?:who|which|what)\b[^.?!]{0,40}\bimplement\b|\bsubclass\w*\b|\boverrid\w*\b|\binherit\w*\b|\bderiv\w*\b|\bextends?\b|\bconcrete\b|\bspeciali[sz]\w*\b")),
    ("references", re.compile(r"\breferenc\w*\b|\busages?\b|\b(?:where|how) (?:is|are) .* used\b|\buses of\b|\bwho uses\b")),
    ("importers", re.compile(r"\bwho imports\b|\bimporters?\b|\bimported (?:by|in|from)\b|\bwhich (?:files|modules) import\b|\b(?:what|who|which \w+) (?:depends?|relies?) on\b|\bdependents\b")),
    ("dependencies", re.compile(r"\bwhat (?:does|do) .* (?:import|depend on|rely on|need)\b|\bdependenc\w*\b|\bimports of\b|\b(?:what|which) .* (?:it|this module|this file) imports\b")),
    ("instantiations", re.compile(r"\binstantiat\w*\b|\binstances? of\b|\bconstruct\w*\b|\bwho creates\b|\bwhere is .* created\b|\bfactor(?:y|ies)\b")),
    ("tests", re.compile(r"\btests\b|\bwhich test\b|\btests? (?:for|of|that|which|covering)\b|\bcover(?:s|ed|age|ing)?\b|\btested\b|\bexercis\w*\b|\bwhat does (?:this|the) test\b|\bunit tests?\b")),
    ("history", re.compile(r"\bchanged?\b.*\brecent\w*\b|\brecent\w*\b.*\bchang\w*\b|\bcommits?\b|\bhistory\b|\bintroduced\b|\bwho (?:changed|wrote|modified)\b|\bchanges? together\b|\bco-?chang\w*\b|\blast (?:changed|modified)\b|\bwhat changed\b")),
    ("impact", re.compile(r"\bwhat (?:must|should|needs to|would|will) change\b|\bimpact\b|\baffect\w*\b|\bbreak\w*\b|\bif .* chang\w*\b|\brefactor\w*\b|\brenam\w*\b|\bsignature\b|\bmove\b|\badd (?:a |an )?(?:new )?(?:parameter|argument|option|field)\b|\bripple\b")),
    ("definition", re.compile(r"\bwhere is .* defined\b|\bdefinition\b|\bdefined\b|\bshow me\b|\bwhat is\b|\bexplain\b|\bhow does\b")),
]

_TEMPORAL = re.compile(
    r"\b(?:earlier|before|previous(?:ly)?|last time|we (?:looked|saw|discussed|talked|were)|i (?:asked|looked|was)|"
    r"just (?:looked|saw|opened|edited)|recently (?:opened|edited|viewed)|a moment ago|again)\b")
_INSTRUCTION = re.compile(
    r"^(?:please\s+)?(?:make|add|fix|change|rename|update|implement|refactor|remove|delete|support|allow|replace|"
    r"move|extract|introduce|convert|handle|ensure|let|use|enable|disable|drop|split|merge|cache|expose|raise|return|"
    r"validate|log|retry|speed up|optimi[sz]e|migrate|deprecate|write|create)\b", re.I)
_CONCEPT = re.compile(r"\b(?:related to|handles?|handling|responsible for|deals? with|about|in charge of|takes care of|for)\s+(?:the\s+)?([a-z][\w\s-]{2,60})", re.I)

_NAMED_KIND = re.compile(r"\b(of\s+)?(the|a|an)\s+(\w+)\s+(function|method|class|module|decorator|helper|attribute)\b")
_KIND_HINT = {"function": "function", "method": "method", "class": "class", "helper": "function", "decorator": "function"}
_NAMED_TARGET = re.compile(r"\b(?:calls?|callers of|uses?|overrides?|subclasses of|implements|instantiates|tests? for|changes to)\s+(\w+)\b")
_DECLARED = re.compile(r"\b(?:function|method|class|def)\s+(\w+)\b")
# task text asks memory only where it names the session itself: in a pasted issue "I looked at
# convertors.py", "we saw this before" and "last time I ran it" are what the reporter did
_SESSION = re.compile(r"\b(?:earlier |before |)in (?:this|the|our) (?:session|chat|conversation)\b")

_QUOTED = re.compile(r"`([^`]+)`|\"([^\"]+)\"|'([^']+)'")
_PATH = re.compile(r"(?<![\w/.])((?:[\w.-]+/)+[\w.-]+\.py|[\w-]+\.py)\b")
_LINE_AFTER = re.compile(r":(\d+)\b")  # `pkg/mod.py:91`, as editors, linters and grep print a place
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_ERROR = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Warning))\b(?::\s*(.+))?")


@dataclass
class Plan:
    query: str
    trigger: str
    operators: list[str]
    mentions: list[str]  # identifiers, dotted names and file paths, in order of appearance
    concepts: list[str] = field(default_factory=list)  # described things ("retry count", "environment settings")
    quoted: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    instruction: bool = False
    temporal: bool = False
    soft: list[tuple[str, str | None, str]] = field(default_factory=list)  # (word, kind hint, role)
    task: bool = False  # long or multi-sentence text: a task such as a pasted issue (evidence.is_task_text)
    place: tuple[str, int] | None = None  # a question's `path.py:LINE`: where it asks about (a cursor)
    linked: list[str] = field(default_factory=list)  # repository files the text links to (evidence.linked_paths)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"trigger": self.trigger, "operators": self.operators, "mentions": self.mentions}
        if self.soft:
            out["described"] = [w for w, _, _ in self.soft]
        if self.task:
            out["task"] = True
        if self.place is not None:
            out["at"] = f"{self.place[0]}:{self.place[1]}"
        return out


def _ends_with(low: str, word: str) -> bool:
    """Whether `word` is the question's last word (a named target, not the start of a description)."""
    return re.search(rf"\b{re.escape(word)}\W*$", low) is not None


def _looks_like_identifier(word: str, sentence_initial: bool) -> bool:
    if "_" in word.strip("_") or (word.startswith("_") and len(word) > 1):
        return True
    inner_caps = any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)
    if inner_caps:
        return True  # CamelCase / mixedCase
    if word.isupper() and len(word) > 2 and not sentence_initial:
        return True  # CONSTANT (but not a shouted first word)
    return False


def make_plan(query: str, is_symbol: Callable[[str], bool] | None = None) -> Plan:
    """Plan a query. `is_symbol(name)` tells whether a plain word names a workspace symbol, so
    `Session` or `dispatch` count as mentions while sentence-initial `Find` does not."""
    text = query.strip()
    low = text.lower()
    mentions: list[str] = []
    soft: list[tuple[str, str | None, str]] = []

    def add(m: str) -> None:
        if m and m not in mentions:
            mentions.append(m)

    quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(text)]
    errors = [m.group(0) for m in _ERROR.finditer(text)]
    for q in quoted:
        q2 = q.strip().rstrip("()")
        if re.fullmatch(r"[A-Za-z_][\w.]*", q2) or _PATH.fullmatch(q2):
            add(q2)
    task = is_task_text(text)
    path_spans = []
    place: tuple[str, int] | None = None
    scan = blank_urls(text)  # a link's host and page path name no code (same offsets as `text`)
    for m in _PATH.finditer(scan):
        path_spans.append(m.span())
        at = _LINE_AFTER.match(scan, m.end()) if not task else None
        if at is not None:  # a question's `path.py:LINE` is a place (its cursor), not the whole file
            if place is None and int(at.group(1)) >= 1:
                place = (m.group(1), int(at.group(1)))
            continue
        add(m.group(1))
    for m in _DOTTED.finditer(scan):
        d = m.group(0)
        if d.endswith(".py") or any(d == p or p.endswith(d) for p in mentions):
            continue
        if re.search(r"\.(?:com|org|net|io)$", d):
            continue
        if d.lower() in PROSE_ABBREVIATIONS:
            continue  # prose, not code (sympy.abc defines `e` and `g`); `u.m` (astropy's metre) is code
        add(d)
    # plain identifiers; the phrase patterns run once over the text (not once per word: task text is long)
    named_kind = {m.group(3): (m.group(4), bool(m.group(1)))
                  for m in _NAMED_KIND.finditer(low)}
    named_target = {m.group(1) for m in _NAMED_TARGET.finditer(low)}
    declared = {m.group(1) for m in _DECLARED.finditer(text)}
    dotted_parts = {part for x in mentions if "." in x for part in x.split(".")}
    sentence_start = True
    for m in _IDENT.finditer(scan):
        word = m.group(0)
        start = m.start()
        k = start - 1
        while k >= 0 and text[k] in " \t":
            k -= 1
        sentence_initial = sentence_start or k < 0 or text[k] in ".?!:\n"
        sentence_start = False
        if word in dotted_parts or word.lower() == "py" or any(a <= start < b for a, b in path_spans):
            continue  # a part of a dotted name or of a path (`ctx_lsp` in `ctx_lsp/index/parse.py`)
        followed_by_call = text[m.end():m.end() + 2] == "()"
        # `@validates` in a question: decorator syntax names a decorator (not in "a@b.com")
        decorator = (not task and start > 0 and text[start - 1] == "@" and (start < 2 or not text[start - 2].isalnum())
                     and is_symbol is not None and is_symbol(word))
        if _looks_like_identifier(word, sentence_initial) or followed_by_call or decorator:
            if word.isupper() and not followed_by_call and is_symbol is not None and not is_symbol(word):
                continue  # an acronym ("URL", "HTTP"), not a constant of this workspace
            add(word)
            continue
        if is_symbol is None or word.lower() in STOPWORDS:
            continue
        if len(word) < 3:
            # a short word is a name only where the text says so, and it exists: a relation's named
            # target ("who calls g") or after its kind ("class Q"); a capital "I" or "A" is prose
            if (word.lower() in named_target or word in declared) and is_symbol(word):
                add(word)
            continue
        if word[0].isupper():
            if sentence_initial and word.lower() in _VERBS:
                continue  # "Find", "Return", "Updates": verbs, not symbols
            if _hyphenated(text, start, m.end()):
                continue  # a compound of prose ("Content-Type", "Pre-Release"): no name has a hyphen
            if is_symbol(word):
                add(word)  # exact-case name of a class or function: "Session", "Flask"
            continue
        lw = word.lower()
        if word in declared and is_symbol(word):
            add(word)  # "the function apply_discount" style, with a lower-case name that exists
            continue
        if any(sm[0] == lw for sm in soft):
            continue
        if lw in named_kind:
            kind_word, container = named_kind[lw]
            soft.append((lw, _KIND_HINT.get(kind_word), "container" if container else "target"))
        elif lw in named_target and word == lw and is_symbol(word) and _ends_with(low, lw):
            add(word)  # "who calls request": the question ends on a name the workspace defines
        elif lw in named_target:
            soft.append((lw, None, "target"))
    for e in errors:
        name = e.split(":")[0]
        if is_symbol is not None and is_symbol(name):
            add(name)

    # Task text (a pasted issue) is about code, and says "before", "previously", "again" of versions:
    # only naming the session asks memory; and its many words would match every operator's pattern.
    operators = [] if task else [op for op, pat in _RULES if pat.search(low)]
    temporal = bool(_SESSION.search(low)) if task else bool(_TEMPORAL.search(low))
    instruction = not task and bool(_INSTRUCTION.match(text))
    if instruction and "impact" not in operators:
        operators.append("impact")
    if "history" in operators and temporal and not re.search(r"\bcommit|\bchang", low):
        operators.remove("history")
    concepts = [m.group(1).strip() for m in _CONCEPT.finditer(text)]
    soft = [sm for sm in soft if sm[0] not in {x.lower() for x in mentions}]
    if temporal:
        trigger = TEMPORAL_HISTORY
    elif instruction or "impact" in operators and not mentions:
        trigger = IMPLICIT_CONTEXT
    elif mentions:
        trigger = EXPLICIT_SYMBOL
    else:
        trigger = SEMANTIC_CONCEPT
    if not operators and mentions and trigger == EXPLICIT_SYMBOL:
        operators = ["definition"]
    order = {op: i for i, op in enumerate(OPERATORS)}
    operators = sorted(set(operators), key=order.__getitem__)
    return Plan(text, trigger, operators, mentions, concepts, quoted, errors, instruction, temporal, soft, task, place,
                linked_paths(text))


def _hyphenated(text: str, start: int, end: int) -> bool:
    """Whether the word at [start, end) is joined to a letter by a hyphen (`Content-Length`)."""
    return ((start >= 2 and text[start - 1] == "-" and text[start - 2].isalpha())
            or (end + 1 < len(text) and text[end] == "-" and text[end + 1].isalpha()))


_VERBS = frozenset("""find return returns update updates make add fix change rename get set show list explain describe
run create delete remove move use handle check load save send read write open close build parse render test call
where what which who how why when""".split())
