"""The server's settings: initializationOptions and the `ctx` section of workspace/configuration.

Both carry the same JSON object (documented in README "Language server"). Each field is checked on
its own: an invalid value is replaced by its default and reported, so one typo never stops the server.
"""

from __future__ import annotations

from typing import Any

import attrs
import cattrs

from ctx_lsp.index.discovery import compile_patterns

_converter = cattrs.Converter()


@attrs.define(frozen=True)
class Options:
    budget: int = 4000  # default token budget of context commands
    include: tuple[str, ...] = ()  # gitignore-style globs of files to index (empty: all)
    exclude: tuple[str, ...] = ()  # gitignore-style globs of files to skip
    cache_dir: str = ""  # "" = the per-workspace user cache directory
    jedi_refinement: bool = True
    debounce_ms: int = 300  # delay before an edit is folded into the graph when no query asks first
    code_lens: bool = True
    dense: bool = False  # the dense generator (needs ctx-lsp[dense]); off by default: see README
    dense_model: str = ""  # a local sentence-transformers model directory; "" = the default package

    def index_key(self) -> tuple[Any, ...]:
        """The settings whose change needs a re-index (the rest apply to the next request)."""
        return (self.include, self.exclude, self.cache_dir, self.jedi_refinement, self.dense, self.dense_model)


def _globs(patterns: tuple[str, ...]) -> bool:
    compile_patterns(patterns, strict=True)  # InvalidPattern (a ValueError) names the bad glob
    return True


# JSON key -> (attribute, JSON type, check beyond the type or None)
_FIELDS: dict[str, tuple[str, type, Any]] = {
    "budget": ("budget", int, lambda v: v > 0),
    "include": ("include", list, _globs),
    "exclude": ("exclude", list, _globs),
    "cacheDir": ("cache_dir", str, None),
    "jediRefinement": ("jedi_refinement", bool, None),
    "debounceMs": ("debounce_ms", int, lambda v: 0 <= v <= 10_000),
    "codeLens": ("code_lens", bool, None),
    "dense": ("dense", bool, None),
    "denseModel": ("dense_model", str, None),
}


def _structure(value: Any, kind: type) -> Any:
    # Strict on JSON types: cattrs alone would turn "3" into 3 and 1 into True, hiding a settings typo.
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise TypeError("expected an integer")
        return _converter.structure(value, int)
    if kind is bool and not isinstance(value, bool):
        raise TypeError("expected true or false")
    if kind is str and not isinstance(value, str):
        raise TypeError("expected a string")
    if kind is list:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise TypeError("expected a list of strings")
        return _converter.structure(value, tuple[str, ...])
    return value


def parse_options(raw: Any, base: Options | None = None) -> tuple[Options, list[str]]:
    """Options from a JSON object, over `base` (default: the defaults). Returns (options, warnings).

    Unknown keys and invalid values produce a warning each; invalid values keep the base value.
    """
    base = base or Options()
    if raw is None or (isinstance(raw, list) and not raw):
        return base, []  # Neovim sends an empty Lua table (`settings = { ctx = {} }`) as a JSON array
    if not isinstance(raw, dict):
        return base, [f"ctx-lsp settings must be an object, got {type(raw).__name__}; using defaults"]
    changes: dict[str, Any] = {}
    warnings: list[str] = []
    for key, value in raw.items():
        if key not in _FIELDS:
            warnings.append(f"ctx-lsp: unknown setting {key!r} ignored")
            continue
        if value is None:
            continue  # a client sends null for "not set"
        attr, kind, check = _FIELDS[key]
        default = getattr(Options(), attr)
        try:
            v = _structure(value, kind)
            if check is not None and not check(v):
                raise ValueError("out of range")
        except (TypeError, ValueError, cattrs.BaseValidationError) as exc:
            warnings.append(f"ctx-lsp: invalid value {value!r} for {key!r} ({exc}); using the default {default!r}")
            continue
        changes[attr] = v
    return attrs.evolve(base, **changes), warnings
