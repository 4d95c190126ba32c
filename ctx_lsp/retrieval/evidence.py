"""Task evidence: what a pasted issue says in code, not in words.

From task text (markdown, reStructuredText, Trac wiki or plain) this extracts typed evidence:
code blocks (fenced, ``{{{ }}}``, ``.. code-block::``/``::`` and indented blocks, doctest and
IPython prompts), traceback frames, exceptions with their messages, error codes, quoted strings,
dotted names, file paths and versions. Pure and tolerant: any text in, evidence out, linear in the
size of the text (one pass per pattern, no backtracking-prone patterns over the whole text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_QUERY_CHARS = 256_000  # 4x GitHub's limit for an issue body; longer text (a pasted log) is cut
_TAIL_CHARS = 64_000  # what is kept from the end: a log's traceback is usually there


def cap_text(text: str, limit: int = MAX_QUERY_CHARS) -> str:
    """Bound what one query can cost: text over `limit` keeps its beginning (the title and description)
    and its end (where a pasted log has its traceback), cut at line breaks."""
    if len(text) <= limit:
        return text
    # room for the marker line, so the result is within `limit` and capping it again is a no-op
    head, tail = text[: limit - _TAIL_CHARS - 100], text[-_TAIL_CHARS:]
    head = head[: head.rfind("\n")] if "\n" in head else head
    tail = tail[tail.find("\n") + 1 :] if "\n" in tail else tail
    return f"{head}\n[... {len(text) - len(head) - len(tail):,} characters left out ...]\n{tail}"


@dataclass(frozen=True, slots=True)
class Frame:
    path: str  # as written in the traceback
    line: int
    function: str


@dataclass
class TaskEvidence:
    text: str
    code: list[str] = field(default_factory=list)  # code snippets (prompts stripped), in order
    frames: list[Frame] = field(default_factory=list)  # outermost first, as tracebacks print them
    exceptions: list[tuple[str, str]] = field(default_factory=list)  # (type, message)
    messages: list[str] = field(default_factory=list)  # error messages and quoted sentences
    codes: list[str] = field(default_factory=list)  # error codes: admin.E108, W0611
    quoted: list[str] = field(default_factory=list)  # inline code and quoted strings
    dotted: list[str] = field(default_factory=list)  # pkg.mod.name as written in prose
    paths: list[str] = field(default_factory=list)  # file paths (.py) named anywhere
    versions: list[str] = field(default_factory=list)
    prose: str = ""  # the text without code blocks and tracebacks (and without template scaffolding)
    search: str = ""  # the text for lexical search: code blocks as written, prose cleaned (clean_prose)

    @property
    def is_task(self) -> bool:
        """Long, multi-sentence or structured text: a task (an issue), not a short question."""
        return is_task_text(self.text)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.code:
            out["code_blocks"] = len(self.code)
        if self.frames:
            out["frames"] = [f"{f.path}:{f.line} {f.function}" for f in self.frames[-8:]]
        if self.exceptions:
            out["exceptions"] = [f"{t}: {m}"[:160] if m else t for t, m in self.exceptions[:6]]
        if self.codes:
            out["codes"] = self.codes[:10]
        if self.paths:
            out["paths"] = self.paths[:10]
        return out


def is_task_text(text: str) -> bool:
    """A task, not a question: several lines of some length, a long text, or three sentences. A
    one-line question (ending in "?") stays a question however it is phrased."""
    t = text.strip()
    if "\n" in t and len(t) > 120 or len(t) > 400:
        return True
    if t.endswith("?"):
        return False
    return len(_SENTENCE_END.findall(t)) >= 3


_NO_TITLE = re.compile(r"^(?:Traceback \(most recent call last\)|```|~~~|>>> |In \[\d+\]: |\$ )")


def issue_title(text: str) -> str:
    """The first line of task text, its title (an issue's most specific sentence), or "" when the
    text opens with code or output instead: a pasted traceback's header says nothing of the code,
    and matches whatever code talks of tracebacks."""
    title = text.strip().split("\n", 1)[0]
    return "" if _NO_TITLE.match(title) else title


_SENTENCE_END = re.compile(r"(?<![.\w]\.)(?<!\.\.)[.!?](?=\s+[A-Z]|\s*$)")
_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
_TRAC = re.compile(r"\{\{\{[ \t]*\n?(?:#!([\w-]+)[^\n]*\n)?(.*?)\}\}\}", re.S)
_FRAME = re.compile(r'^\s*File "([^"\n]+)", line (\d+)(?:, in ([^\s\n]+))?', re.M)
_PYTEST_FRAME = re.compile(r"^([\w./\\-]+\.py):(\d+): (?:in (\w+)|(\w+(?:Error|Exception|Warning)\b))", re.M)
_EXC_LINE = re.compile(
    r"^[ \t>E]*((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt|Failure|Iteration))\b(?::[ \t]*([^\n]*))?$",
    re.M)
_EXC_TAIL = re.compile(r"((?:[A-Za-z_]\w*\.)*[A-Z]\w*)(?::[ \t]*(.*))?")  # a traceback's last line
_EXC_INLINE = re.compile(
    r"(?<![\w.])((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning))(?::[ \t]+|\(['\"])([^\n]{4,300})")
_CODE_TOKEN = re.compile(r"(?<![\w.])((?:[a-z_]+\.)?[A-Z]{1,2}\d{3,4})(?![\w])")
_INLINE = re.compile(r"``([^`\n]+)``|`([^`\n]+)`")
_QUOTED = re.compile(r"\"([^\"\n]{3,300})\"|(?<![\w])'([^'\n]{3,300})'(?![\w])|\u201c([^\u201d\n]{3,300})\u201d")
_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+[/\\])*[\w-]+\.py)\b")
_DOTTED = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w])")
# prose abbreviations as the dotted-name patterns find them (lower-cased): not names of code
PROSE_ABBREVIATIONS = frozenset({"e.g", "i.e", "a.k.a", "n.b", "p.s", "q.v", "et.al", "c.f"})
_VERSION = re.compile(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)*(?:(?:a|b|rc|\.dev|\.post)\d+)?)(?![\w.])")
_PROMPT = re.compile(r"^[ \t]*(?:>>>|\.\.\.)(?: |$)|^[ \t]*In \[\d+\]: |^[ \t]*\.\.\.: ")
_RST_BLOCK = re.compile(r"(?:^\.\. (?:code-block|code|sourcecode|ipython)::[^\n]*|::)[ \t]*\n")
_NOT_PYTHON = frozenset({"bash", "sh", "shell", "console", "text", "txt", "ini", "toml", "yaml", "yml", "json",
                         "html", "xml", "css", "js", "javascript", "diff", "patch", "sql", "rst", "cfg", "none",
                         "output", "pytb", "traceback", "make", "makefile", "dockerfile", "csv", "tex", "latex"})
_URL = re.compile(r"https?://\S+")
# a repository host's link to a file: `/blob/<branch>/<path>.py` (also tree, raw, src, browser)
_REPO_PATH = r"/(?:blob|tree|raw|src|browser)/[^/\s]+/(\S+?\.py)\b"
_REPO_FILE = re.compile(_REPO_PATH)
_ANCHOR = re.compile(r"#([^\s#]+?)[)\].,;:'\">]*$")
_LINE_ANCHOR = re.compile(r"L\d+(?:-L\d+)?")  # a line of a file on GitHub


def linked_paths(text: str) -> list[str]:
    """The repository files the links in `text` point to, as the link writes them after its branch
    (`.../blob/stable/2.2.x/django/db/models/query.py#L10` -> `2.2.x/django/db/models/query.py`: a
    branch name may hold a slash, so the path may have more in front than the workspace has)."""
    return list(dict.fromkeys(m.group(1) for m in _BLOB_URL.finditer(text)))


def blank_urls(text: str) -> str:
    """`text` with every link blanked out (offsets kept: the same length) except what in it names code:
    a repository link's file path (`.../blob/main/pkg/mod.py#L10`) and the anchor of a documentation
    page, which Sphinx makes of the object's dotted name or the setting's (`#django.db.models.Field`,
    `#std-setting-DATABASES`; hyphens and colons become spaces). The rest of a link (host, page path,
    query) holds words like `html.html` or `docs` that name nothing in the workspace."""

    def keep(m: re.Match[str]) -> str:
        url = m.group(0)
        out = [" "] * len(url)
        for pat in (_REPO_FILE, _ANCHOR):
            k = pat.search(url)
            if k is not None and not (pat is _ANCHOR and _LINE_ANCHOR.fullmatch(k.group(1))):
                a, b = k.span(1)
                out[a:b] = url[a:b].replace("-", " ").replace(":", " ") if pat is _ANCHOR else url[a:b]
        return "".join(out)

    return _URL.sub(keep, text)


def extract_evidence(text: str) -> TaskEvidence:
    """Typed evidence from task text. Never raises; cost is linear in len(text)."""
    text = cap_text(text).replace("\r\n", "\n").replace("\r", "\n")
    ev = TaskEvidence(text)
    blocks: list[tuple[int, int]] = []  # spans of code blocks, removed from the prose
    for m in _FENCE.finditer(text):
        lang = m.group(2).lower()
        body = m.group(3)
        blocks.append(m.span())
        if lang in _NOT_PYTHON:
            _prompt_code(body, ev)  # `console` blocks often hold a doctest session
            continue
        _add_code(body, ev)
    for m in _TRAC.finditer(text):
        if _inside(m.start(), blocks):
            continue
        blocks.append(m.span())
        lang = (m.group(1) or "").lower()
        if lang in _NOT_PYTHON:
            _prompt_code(m.group(2), ev)
        else:
            _add_code(m.group(2), ev)
    _indented_blocks(text, blocks, ev)
    _bare_code(text, blocks, ev)
    if not ev.code:
        _prompt_code(text, ev)  # doctest lines in plain text
    _tracebacks(text, ev)
    prose = clean_prose(_cut(text, blocks))
    ev.prose = prose
    ev.search = _clean_between(text, blocks)
    without_urls = blank_urls(text)
    seen_codes: set[str] = set()
    for m in _CODE_TOKEN.finditer(without_urls):
        c = m.group(1)
        if c not in seen_codes and not re.fullmatch(r"L\d+", c):  # `#L428`: a line anchor, not a code
            seen_codes.add(c)
            ev.codes.append(c)
    for m in _INLINE.finditer(prose):
        q = (m.group(1) or m.group(2)).strip()
        if q and q not in ev.quoted:
            ev.quoted.append(q)
    for m in _QUOTED.finditer(_URL.sub(" ", prose)):
        q = next(g for g in m.groups() if g).strip()
        if q and q not in ev.quoted:
            ev.quoted.append(q)
        if " " in q and len(q) >= 12 and q not in ev.messages:
            ev.messages.append(q)
    for _, msg in ev.exceptions:
        if len(msg) >= 8 and msg not in ev.messages:
            ev.messages.append(msg)
    for m in _PATH.finditer(without_urls):
        p = m.group(1).replace("\\", "/")
        if p not in ev.paths:
            ev.paths.append(p)
    for m in _DOTTED.finditer(without_urls):
        d = m.group(1)
        if d.endswith(".py") or re.search(r"\.(?:com|org|net|io|html|txt|rst|cfg|toml|json|yml|yaml)$", d):
            continue
        if d.lower() in PROSE_ABBREVIATIONS:
            continue
        if d not in ev.dotted:
            ev.dotted.append(d)
    for m in _VERSION.finditer(prose):
        if m.group(1) not in ev.versions:
            ev.versions.append(m.group(1))
    return ev


# -- what an issue says that is not about the code: template scaffolding, markup, links --------------
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_MD_IMAGE = re.compile(r"!\[[^\]\n]*\]\([^)\s]*\)")
_IMAGE_URL = re.compile(r"https?://(?:\S*githubusercontent\.com/\S*|\S+\.(?:png|jpe?g|gif|svg|webp)\b\S*)", re.I)
_HTML_TAG = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>\n]*)?/?>")
_BLOB_URL = re.compile(r"https?://\S*?" + _REPO_PATH + r"\S*")
_HEADING = re.compile(r"^[ \t]*(?:#{2,6}[ \t]+[^\n]*|(?:\*\*|__)[^*_\n]+(?:\*\*|__)[ \t]*:?)[ \t]*$", re.M)
_CHECKLIST = re.compile(r"^[ \t]*[-*+][ \t]+\[[ xX]?\][^\n]*$", re.M)
_ENV_LINE = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+)?(?:\*\*)?[\w .()/-]{0,40}?\b(?:version|versions|os|operating system|platform|"
    r"installation|installed via|browser|python|backend|environment)\b[\w .()/-]{0,20}(?:\*\*)?[ \t]*:[^\n]{0,80}$",
    re.M | re.I)
_VERSION_LINE = re.compile(r"^[ \t]*(?:[-*+][ \t]+)?[\w .()-]{1,40}:[ \t]+v?\d+(?:\.\d+)+\S*(?:[ \t]+\([^)\n]*\))?[^\n\w]*$",
                           re.M)  # `numpy: 1.24.2`, `python: 3.10.6 (main, ...)`: a pasted environment dump
# markdown headings from `##` on: a single `#` line is as often a Python comment in code pasted without fences
HEADING_WORDS = 6  # a heading this short is a template's section name ("Describe the bug", "Code for reproduction")


def clean_prose(text: str) -> str:
    """Prose without what issue templates and markup add to every issue: HTML comments (template
    instructions), images and their URLs, HTML tags, short headings and bold-only lines (section names),
    checklists, and environment lines (`- Python version: 3.9`, `OS: Mac`). Their words (bug,
    reproduce, expected, version, screen, shot) match whatever code happens to use them, not what the
    issue is about. A link to a file in a repository keeps just its path; other links stay (a link to
    the docs names the topic)."""
    text = _HTML_COMMENT.sub(" ", text)
    text = _MD_IMAGE.sub(" ", text)
    text = _BLOB_URL.sub(lambda m: " " + m.group(1) + " ", text)
    text = _HTML_TAG.sub(" ", text)
    text = _IMAGE_URL.sub(" ", text)
    text = _HEADING.sub(lambda m: "" if len(m.group(0).split()) <= HEADING_WORDS else m.group(0), text)
    text = _CHECKLIST.sub("", text)
    return _VERSION_LINE.sub("", _ENV_LINE.sub("", text))


def _clean_between(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with the prose between code blocks cleaned (clean_prose) and the blocks as written (a
    `# comment` in code is no heading); the first line, an issue's title, is kept whole."""
    title, nl, _ = text.partition("\n")
    out: list[str] = [title]
    last = len(title) + len(nl)
    for a, b in sorted(spans):
        if a >= last:
            out.append(clean_prose(text[last:a]))
            out.append(_VERSION_LINE.sub("", text[a:b]))
            last = b
        elif b > last:  # a block overlapping the title
            out.append(text[last:b])
            last = b
    out.append(clean_prose(text[last:]))
    return "\n".join(x for x in out if x)


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in spans)


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    out: list[str] = []
    last = 0
    for a, b in sorted(spans):
        if a >= last:
            out.append(text[last:a])
            last = b
    out.append(text[last:])
    return "\n".join(out)


def _add_code(body: str, ev: TaskEvidence) -> None:
    if any(_PROMPT.match(line) for line in body.splitlines()):
        _prompt_code(body, ev)
        return
    code = _dedent(body)
    if _looks_like_code(code):
        ev.code.append(code)


def _prompt_code(body: str, ev: TaskEvidence) -> None:
    """Doctest (`>>>`, `...`) and IPython (`In [1]:`) sessions: the input lines, outputs dropped."""
    lines: list[str] = []
    for line in body.splitlines():
        m = _PROMPT.match(line)
        if m:
            lines.append(line[m.end():])
    if lines:
        code = _dedent("\n".join(lines))
        if _looks_like_code(code):
            ev.code.append(code)


_CODE_LINE = re.compile(r"^\s*(?:from\s+[\w.]+\s+import\b|import\s+[\w.]|def\s+\w+\s*\(|class\s+\w+|@\w|return\b|"
                        r"[\w.\[\]'\"]+\s*(?:=|\+=|-=)\s*\S|[\w.]+\s*\(.*\)\s*$|(?:if|for|while|with|try)\b.*:\s*$)")


def _looks_like_code(code: str) -> bool:
    lines = [line for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        return False
    hits = sum(1 for line in lines if _CODE_LINE.match(line))
    return hits >= max(1, len(lines) // 3)


def _dedent(body: str) -> str:
    lines = body.expandtabs(4).splitlines()
    widths = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(widths) if widths else 0
    return "\n".join(line[cut:] for line in lines)


def _indented_blocks(text: str, taken: list[tuple[int, int]], ev: TaskEvidence) -> None:
    """Indented code (rst `::` blocks, plain issues pasting code with four spaces or a tab)."""
    pos = 0
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        start = pos
        if line[:1] in (" ", "\t") and line.strip() and (i == 0 or not lines[i - 1].strip()
                                                         or lines[i - 1].rstrip().endswith("::")):
            j = i
            end = pos
            body: list[str] = []
            while j < len(lines) and (not lines[j].strip() or lines[j][:1] in (" ", "\t")):
                body.append(lines[j])
                end += len(lines[j])
                j += 1
            if not _inside(start, taken) and len(body) >= 1:
                code = _dedent("".join(body))
                if not _FRAME.search(code) and _looks_like_code(code):
                    taken.append((start, end))
                    if any(_PROMPT.match(b) for b in body):
                        _prompt_code("".join(body), ev)
                    else:
                        ev.code.append(code)
            pos = end
            i = j
            continue
        pos += len(line)
        i += 1


_CODE_START = re.compile(r"^(?:from\s+[\w.]+\s+import\s+\S|import\s+[\w.]+\s*$|class\s+\w+\s*[(:]|(?:async\s+)?def\s+\w+\s*\(|@[\w.]+)")


def _bare_code(text: str, taken: list[tuple[int, int]], ev: TaskEvidence) -> None:
    """Code pasted without any markup (common in Trac and mailing-list issues): a run of lines that
    starts with an import, a class or a def and goes on while lines are indented or look like code."""
    lines = text.splitlines(keepends=True)
    pos = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        if _CODE_START.match(line) and not _inside(pos, taken):
            start = pos
            body = [line]
            end = pos + len(line)
            j = i + 1
            while j < len(lines):
                nxt = lines[j]
                if nxt.strip() and not (nxt[:1] in (" ", "\t") or _CODE_LINE.match(nxt) or _CODE_START.match(nxt)):
                    break
                if not nxt.strip() and (j + 1 >= len(lines) or not _CODE_START.match(lines[j + 1])
                                        and lines[j + 1][:1] not in (" ", "\t")):
                    break
                body.append(nxt)
                end += len(nxt)
                j += 1
            code = "".join(body)
            if _looks_like_code(code):
                taken.append((start, end))
                ev.code.append(_dedent(code))
            pos = end
            i = j
            continue
        pos += len(line)
        i += 1


_TB_CHROME = re.compile(
    r"^[ \t]*(?:Traceback \(most recent call last\):|During handling of the above exception, another exception "
    r"occurred:|The above exception was the direct cause of the following exception:|[\^~]+)[ \t]*$", re.M)
_FRAME_LINE = re.compile(r'^([ \t]*)File "[^"\n]+", line \d+(?:, in ([^\s\n]+))?', re.M)
_PYTEST_FRAME_LINE = re.compile(r"^[\w./\\-]+\.py:\d+: in (\w+)", re.M)


def without_traceback_chrome(text: str) -> str:
    """`text` with what Python's traceback format adds around the frames: the headers, carets, and each
    frame's path and line number (its function name stays). Their words (most recent call last, file,
    line, site-packages, python3) match code lines that have nothing to do with the task."""
    text = _TB_CHROME.sub("", text)
    text = _FRAME_LINE.sub(lambda m: m.group(1) + ("" if (m.group(2) or "").startswith("<") else m.group(2) or ""), text)
    return _PYTEST_FRAME_LINE.sub(lambda m: m.group(1), text)


def _traceback_tails(text: str) -> list[tuple[str, str]]:
    """(type, message) of the line that ends each `Traceback (most recent call last):` block: the first
    line back at the block's indentation after its frames. Any name goes there (`DoesNotExist`,
    `ImproperlyConfigured`, `decimal.InvalidOperation`), not only those `_EXC_LINE` knows by suffix."""
    out: list[tuple[str, str]] = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.strip() != "Traceback (most recent call last):":
            continue
        base = len(line) - len(line.lstrip())
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > base):
            j += 1  # frames, their source lines and carets, blank lines
        if j < len(lines) and (m := _EXC_TAIL.fullmatch(lines[j].strip())):
            out.append((m.group(1), (m.group(2) or "").strip()))
    return out


def _tracebacks(text: str, ev: TaskEvidence) -> None:
    for m in _FRAME.finditer(text):
        ev.frames.append(Frame(m.group(1).replace("\\", "/"), int(m.group(2)), m.group(3) or ""))
    for m in _PYTEST_FRAME.finditer(text):
        ev.frames.append(Frame(m.group(1).replace("\\", "/"), int(m.group(2)), m.group(3) or ""))
    seen: set[tuple[str, str]] = set()
    if "Traceback (most recent call last):" in text:
        for key in _traceback_tails(text):
            if key not in seen:
                seen.add(key)
                ev.exceptions.append(key)
    for m in _EXC_LINE.finditer(text):
        key = (m.group(1), (m.group(2) or "").strip())
        if key not in seen:
            seen.add(key)
            ev.exceptions.append(key)
    named = {t for t, _ in ev.exceptions}
    for m in _EXC_INLINE.finditer(text):
        if m.group(1) in named:
            continue
        msg = m.group(2)
        if m.start(1) > 0 and text[m.start(1) - 1] == "`":
            msg = msg.split("`", 1)[0]  # quoted as inline code: the message ends with it
        msg = msg.strip().rstrip("')\"").strip()
        key = (m.group(1), msg)
        if key not in seen:
            seen.add(key)
            ev.exceptions.append(key)
