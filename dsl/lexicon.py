"""The words of the language, written once: patterns and keywords read from grammar.lark.

Whatever looks at `.decomp` text without parsing it (the parser's fast path and error recovery,
the language server, the views, the TextMate grammar's tests) takes its patterns from here, so
a change to grammar.lark reaches all of them. Each is built from the one Lark parser
(`dsl.grammar.parser`) when first read, never at import (`import decomp` stays lazy):

    from decomp.dsl import lexicon
    lexicon.REF.finditer(text)           # `#1`, `#name`: grammar.lark's REF
    lexicon.DECLARATIONS                 # ("import", "model", ...): what a top-level line starts with
    lexicon.STEP_HEAD.match(line)        # `QS: (op) [handler] ` before a step's text
"""
from __future__ import annotations

import re
from functools import lru_cache

from lark.lexer import PatternStr

from decomp.dsl.grammar import parser

#: The names this module builds on first use; `__getattr__` makes and keeps each one.
__all__ = ["terminal", "NAME", "REF", "STRING", "OPERATOR", "HANDLER_REF", "QS_LINE", "STEP_LINE", "STEP_HEAD",
           "DECLARATION_START", "DECLARATIONS", "KEYWORDS", "MARKERS"]


@lru_cache(maxsize=None)
def terminal(name: str) -> str:
    """The regular expression of grammar.lark's terminal `name` (a literal one escaped), as a
    group that composes: `(?:...)`."""
    return f"(?:{parser().get_terminal(name).pattern.to_regexp()})"


def _literal(name: str) -> str:
    return parser().get_terminal(name).pattern.value


def _declarations() -> tuple[str, ...]:
    """The keyword each kind of top-level statement (`_stmt`'s alternatives) starts with."""
    rules = parser().rules
    statements = list(dict.fromkeys(r.expansion[0].name for r in rules if r.origin.name == "_stmt"))
    first = {r.origin.name: r.expansion[0].name for r in rules if r.origin.name in statements}
    return tuple(_literal(first[s]) for s in statements)


def _literals(shape: str) -> tuple[str, ...]:
    """grammar.lark's literal words (anonymous or named string terminals) that fully match `shape`."""
    return tuple(t.pattern.value for t in parser().terminals
                 if isinstance(t.pattern, PatternStr) and re.fullmatch(shape, t.pattern.value))


def _keywords() -> tuple[str, ...]:
    """Every word of the language: `import` ... `depth`, `true`, `false`, `null`, and COMPARE's `in`."""
    compare = parser().get_terminal("COMPARE").pattern.to_regexp()
    return tuple(dict.fromkeys([*_literals(r"[a-z]+"), *re.findall(r"[a-z]+", compare)]))


def _step_line() -> re.Pattern:
    """One step line, from grammar.lark's terminals: `step` / `bare_step`, blanks ignored.

    Lark's contextual lexer tries the terminals a state allows by priority, and REST takes
    the rest of the line, so the greedy optional groups below split a line as Lark does."""
    ws = terminal("WS") + "?"
    return re.compile(f"{ws}(?P<mark>{terminal('QS_MARK')})?{ws}(?P<op>{terminal('OPERATOR')})?{ws}"
                      f"(?P<handler>{terminal('HANDLER_REF')})?{ws}(?P<rest>{terminal('REST')})?{ws}")


_BUILDERS = {
    "NAME": lambda: re.compile(terminal("NAME")),
    "REF": lambda: re.compile(terminal("REF")),
    "STRING": lambda: re.compile(terminal("STRING")),
    "OPERATOR": lambda: re.compile(terminal("OPERATOR")),
    "HANDLER_REF": lambda: re.compile(terminal("HANDLER_REF")),
    # a line that is a step: its `QS:` mark, blanks around it
    "QS_LINE": lambda: re.compile(f"{terminal('WS')}?{terminal('QS_MARK')}{terminal('WS')}?"),
    "STEP_LINE": _step_line,
    # what comes before a step's text: `QS:`, `(operator)`, `[handler]`, each optional
    "STEP_HEAD": lambda: re.compile(f"{terminal('WS')}?(?:{terminal('QS_MARK')}{terminal('WS')}?)?"
                                    f"(?:{terminal('OPERATOR')}{terminal('WS')}?)?"
                                    f"(?:{terminal('HANDLER_REF')}{terminal('WS')}?)?"),
    # a line that starts a top-level declaration
    "DECLARATION_START": lambda: re.compile(f"(?:{'|'.join(_declarations())})\\b"),
    "DECLARATIONS": _declarations,
    "KEYWORDS": _keywords,
    "MARKERS": lambda: _literals(r"[A-Z]+:"),
}


def __getattr__(name: str):
    """Build a pattern or word list on first use and keep it as a module attribute."""
    if name not in _BUILDERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = _BUILDERS[name]()
    return value
