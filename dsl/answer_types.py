"""The type language of answers: what a handler or program returns, and what a parameter takes.

    any  str  int  float  bool                  scalars (`float` takes whole numbers too)
    list[T]                                     a list of T
    {name: str, year: int}                      an object with these fields (all required)
    one_of("yes", "no")                         one of these literals (strings, numbers, booleans)
    pattern(r"\\d{4}")                          a string the whole of which matches the regex
    schema("person.json")                       a JSON Schema file (relative to the .decomp file)

Types are written in `returns=` options, `program NAME(p: T) -> T`, and as text (`"list[str]"`),
all read by the grammar's `type_expr` rule. Untyped is `any`: gradual typing, nothing checked.
Every type has a JSON Schema (`schema()`), which validates answers (jsonschema) and constrains
models (`decomp.runtime.models.base.Constraint`); `accepts` is the static relation the checker
uses, `infer` the type examples show.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Callable

from decomp.dsl.errors import DecompError

__all__ = ["ANY", "AnyType", "Bool", "Constraint", "Float", "Int", "ListOf", "Obj", "OneOf", "Pattern", "SchemaFile", "Str",
           "Type", "TypeProblem", "accepts", "infer", "item_type", "join", "parse_type", "type_of_value"]


class TypeProblem(DecompError, ValueError):
    """A type that cannot be read: bad syntax, an unknown name, a schema file that is not one."""


class Type:
    """Base of the types. Subclasses are frozen dataclasses with a canonical `text`."""

    text: str = "any"

    def __str__(self) -> str:
        return self.text

    def schema(self) -> dict:
        """The JSON Schema of the values of this type."""
        return {}

    @property
    def is_any(self) -> bool:
        return isinstance(self, AnyType)

    def coerce(self, value: Any) -> Any:
        """`value` as this type reads it, where that loses nothing: a number or boolean for a
        string type becomes its JSON text; "yes"/"no"/"true"/"false" (any case) for `bool`
        become true/false; a choice matched without regard to case becomes the choice."""
        return value

    def problem(self, value: Any) -> str | None:
        """Why `value` is not of this type, in words (jsonschema's); None when it is."""
        if self.plainly_fits(value):
            return None
        return _validation_problem(self.schema_text, value)

    def plainly_fits(self, value: Any) -> bool:
        """A quick yes for the plain types (a string for `str`, a list of them for `list[str]`,
        ...), without a schema validation: the answers that fit, which are most of them, cost
        an `isinstance`. False means "ask jsonschema", which words the problem."""
        return False

    @cached_property
    def schema_text(self) -> str:
        """`schema()` as canonical JSON text (sorted keys): a constraint's and a cache key's form."""
        return json.dumps(self.schema(), sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True, eq=True)
class AnyType(Type):
    text: str = "any"

    def problem(self, value: Any) -> str | None:
        return None


ANY = AnyType()


@dataclass(frozen=True)
class Str(Type):
    text: str = "str"

    def schema(self) -> dict:
        return {"type": "string"}

    def plainly_fits(self, value: Any) -> bool:
        return isinstance(value, str)

    def coerce(self, value: Any) -> Any:
        return _scalar_text(value)


@dataclass(frozen=True)
class Pattern(Type):
    regex: str = ""

    @property
    def text(self) -> str:
        return f"pattern({json.dumps(self.regex, ensure_ascii=False)})"

    def schema(self) -> dict:
        return {"type": "string", "pattern": f"^(?:{self.regex})$"}

    def problem(self, value: Any) -> str | None:
        if not isinstance(value, str):
            return super().problem(value)
        return _pattern_problem(self._compiled, value)

    @cached_property
    def _compiled(self):
        import regex

        return regex.compile(f"^(?:{self.regex})$")

    def coerce(self, value: Any) -> Any:
        return _scalar_text(value)


@dataclass(frozen=True)
class Int(Type):
    text: str = "int"

    def schema(self) -> dict:
        return {"type": "integer"}

    def plainly_fits(self, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    def coerce(self, value: Any) -> Any:
        return int(value) if isinstance(value, float) and value.is_integer() else value


@dataclass(frozen=True)
class Float(Type):
    text: str = "float"

    def schema(self) -> dict:
        return {"type": "number"}

    def plainly_fits(self, value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class Bool(Type):
    text: str = "bool"

    def schema(self) -> dict:
        return {"type": "boolean"}

    def plainly_fits(self, value: Any) -> bool:
        return isinstance(value, bool)

    def coerce(self, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in _TRUTH:
            return _TRUTH[value.strip().lower()]
        return value


_TRUTH = {"yes": True, "true": True, "no": False, "false": False}


@dataclass(frozen=True)
class ListOf(Type):
    item: Type = ANY

    @property
    def text(self) -> str:
        return f"list[{self.item.text}]"

    def schema(self) -> dict:
        inner = self.item.schema()
        return {"type": "array", "items": inner} if inner else {"type": "array"}

    def coerce(self, value: Any) -> Any:
        return [self.item.coerce(v) for v in value] if isinstance(value, list) else value

    def plainly_fits(self, value: Any) -> bool:
        return isinstance(value, list) and (self.item.is_any or all(map(self.item.plainly_fits, value)))


@dataclass(frozen=True)
class Obj(Type):
    fields: tuple[tuple[str, Type], ...] = ()

    @property
    def text(self) -> str:
        return "{" + ", ".join(f"{name}: {t.text}" for name, t in self.fields) + "}"

    def schema(self) -> dict:
        return {"type": "object", "properties": {name: t.schema() for name, t in self.fields},
                "required": [name for name, _ in self.fields], "additionalProperties": False}

    def coerce(self, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {k: dict(self.fields)[k].coerce(v) if k in dict(self.fields) else v for k, v in value.items()}


@dataclass(frozen=True)
class OneOf(Type):
    choices: tuple = ()

    @property
    def text(self) -> str:
        return "one_of(" + ", ".join(json.dumps(c, ensure_ascii=False) for c in self.choices) + ")"

    def schema(self) -> dict:
        return {"enum": list(self.choices)}

    def plainly_fits(self, value: Any) -> bool:
        return any(value == c and type(value) is type(c) for c in self.choices)

    def coerce(self, value: Any) -> Any:
        if value in self.choices and type(value) in {type(c) for c in self.choices if c == value}:
            return value
        text = _scalar_text(value)
        if isinstance(text, str):
            folded = [c for c in self.choices if isinstance(c, str) and c.lower() == text.strip().lower()]
            if len(folded) == 1:
                return folded[0]
            numbers = [c for c in self.choices if not isinstance(c, (str, bool)) and json.dumps(c) == text.strip()]
            if len(numbers) == 1:
                return numbers[0]
        return value


@dataclass(frozen=True)
class SchemaFile(Type):
    """A JSON Schema read from a file: `path` as written, `content` its canonical JSON text."""

    path: str = ""
    content: str = "{}"

    @property
    def text(self) -> str:
        return f"schema({json.dumps(self.path, ensure_ascii=False)})"

    def schema(self) -> dict:
        return json.loads(self.content)


def _scalar_text(value: Any) -> Any:
    """A number or boolean as its JSON text (how a string type reads one); anything else as is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return value


@lru_cache(maxsize=256)
def _validator(schema_text: str):
    import jsonschema

    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls = jsonschema.validators.extend(cls, {"pattern": _bounded_pattern})
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


#: Seconds a type's regular expression may take on one answer: the pattern is the program's,
#: the text a model's, so a catastrophic pattern fails that answer instead of hanging the run.
PATTERN_SECONDS = 1.0


def _bounded_pattern(validator, pattern: str, instance: Any, schema: dict):
    """JSON Schema's `pattern` keyword, searched with the `regex` module under a time limit."""
    import regex
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "string"):
        return
    try:
        compiled = regex.compile(pattern)
    except regex.error as err:
        yield ValidationError(f"the pattern {pattern!r} is not a regular expression ({err})")
        return
    problem = _pattern_problem(compiled, instance)
    if problem is not None:
        yield ValidationError(problem)


def _pattern_problem(compiled, text: str) -> str | None:
    """Why `text` does not match `compiled` (searched under `PATTERN_SECONDS`), or None."""
    try:
        found = compiled.search(text, timeout=PATTERN_SECONDS)
    except TimeoutError:
        return f"the pattern {compiled.pattern!r} took over {PATTERN_SECONDS:g} s on this answer"
    return None if found is not None else f"{text!r} does not match {compiled.pattern!r}"


def _validation_problem(schema_text: str, value: Any) -> str | None:
    error = next(iter(_validator(schema_text).iter_errors(value)), None)
    if error is None:
        return None
    where = "".join(f"[{p!r}]" for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


# ------------------------------------------------------------------ reading types
_SCALARS: dict[str, Type] = {"any": ANY, "str": Str(), "int": Int(), "float": Float(), "bool": Bool()}


def parse_type(text: str, resolve: Callable[[str], Path] | None = None) -> Type:
    """The type written `text` (`list[str]`, `{a: int}`, ...). `resolve` turns a `schema("...")`
    path into the file to read (from the .decomp file's folder); without it, schema files are
    refused. Raises `TypeProblem` with the reason in words."""
    from lark.exceptions import LarkError

    from decomp.dsl.grammar import parser

    try:
        tree = parser().parse(text, start="type_expr")
    except LarkError as err:
        raise TypeProblem(f"cannot read the type {text!r}: {str(err).splitlines()[0]}") from None
    return _build(tree.children[0], resolve)


def _build(tree, resolve) -> Type:
    """A Type from the `type` subtree of the grammar (iterative over list nesting is not
    needed: types are written by hand and the parser bounds their depth)."""
    from decomp.dsl.parser import decode_string

    kind = tree.data
    if kind == "type_name":
        name = str(tree.children[0])
        if name not in _SCALARS:
            raise TypeProblem(f"unknown type {name!r}: one of {', '.join(_SCALARS)}, list[T], {{field: T}}, "
                              "one_of(...), pattern(\"regex\"), schema(\"file.json\")")
        return _SCALARS[name]
    if kind == "type_apply":
        name, inner = str(tree.children[0]), tree.children[1]
        if name != "list":
            raise TypeProblem(f"unknown type {name}[...]: list[T] is the only one")
        return ListOf(_build(inner, resolve))
    if kind == "type_object":
        fields = [(str(f.children[0]), _build(f.children[1], resolve)) for f in tree.children]
        names = [n for n, _ in fields]
        if len(set(names)) != len(names):
            raise TypeProblem(f"a field appears twice in {{{', '.join(names)}}}")
        return Obj(tuple(fields))
    name, args = str(tree.children[0]), [_literal(a, decode_string) for a in tree.children[1:]]
    return _call(name, args, resolve)


def _literal(token, decode_string) -> Any:
    if getattr(token, "data", None) in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[token.data]
    if token.type in ("STRING", "LONG_STRING"):
        return decode_string(str(token))
    number = float(token)
    return int(number) if number.is_integer() and "." not in token and "e" not in token.lower() else number


def _call(name: str, args: list, resolve) -> Type:
    if name == "one_of":
        if not args or len(set(map(json.dumps, args))) != len(args):
            raise TypeProblem("one_of(...) needs one or more different literals")
        return OneOf(tuple(args))
    if name in ("pattern", "schema") and (len(args) != 1 or not isinstance(args[0], str)):
        raise TypeProblem(f"{name}(...) takes one string")
    if name == "pattern":
        return Pattern(_checked_regex(args[0]))
    if name == "schema":
        return _schema_file(args[0], resolve)
    raise TypeProblem(f"unknown type {name}(...): one_of(...), pattern(\"regex\") or schema(\"file.json\")")


def _checked_regex(regex: str) -> str:
    import re

    try:
        re.compile(regex)
    except re.error as err:
        raise TypeProblem(f"pattern {regex!r} does not compile: {err}") from None
    return regex


def _schema_file(path: str, resolve) -> SchemaFile:
    import jsonschema

    from decomp.dsl.parser import not_read, read_text

    if resolve is None:
        raise TypeProblem(f"schema({path!r}): a schema file is read only from a program's folder")
    found = path
    try:
        found = resolve(path)
        schema = json.loads(read_text(found))
    except DecompError as err:  # read_text's worded refusals
        raise TypeProblem(f"schema({path!r}): {err.message}") from None
    except OSError as err:
        raise TypeProblem(f"schema({path!r}): {not_read(found, 'schema file')} ({err.strerror})") from None
    except ValueError as err:  # outside the program's folders, or not JSON
        raise TypeProblem(f"schema({path!r}): {getattr(err, 'message', None) or err}") from None
    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as err:
        raise TypeProblem(f"schema({path!r}) is not a JSON Schema: {err.message}") from None
    return SchemaFile(path, json.dumps(schema, sort_keys=True, ensure_ascii=False))


# ------------------------------------------------------------------ static relations
def accepts(want: Type, have: Type) -> bool:
    """Whether a value of type `have` can be one of `want` (after `coerce`): what the checker
    asks where an answer flows into a parameter or an operator. `any`, either side, is yes;
    so is a schema file, whose shape the checker does not follow."""
    if want.is_any or have.is_any or isinstance(want, SchemaFile) or isinstance(have, SchemaFile):
        return True
    if isinstance(want, (Str, Pattern)):
        return isinstance(have, (Str, Pattern, Int, Float, Bool)) or (
            isinstance(have, OneOf) and all(not isinstance(c, (list, dict)) for c in have.choices))
    if isinstance(want, Float):
        return isinstance(have, (Int, Float)) or _choices_are(have, (int, float))
    if isinstance(want, Int):
        return isinstance(have, Int) or _choices_are(have, (int,))
    if isinstance(want, Bool):
        return isinstance(have, Bool) or (isinstance(have, OneOf) and all(
            isinstance(c, bool) or (isinstance(c, str) and c.lower() in _TRUTH) for c in have.choices))
    if isinstance(want, ListOf):
        return isinstance(have, ListOf) and accepts(want.item, have.item)
    if isinstance(want, Obj):
        return isinstance(have, Obj) and all(
            name in dict(have.fields) and accepts(t, dict(have.fields)[name]) for name, t in want.fields)
    if isinstance(want, OneOf):
        if isinstance(have, OneOf):
            return all(want.coerce(c) in want.choices for c in have.choices)
        return isinstance(have, (Str, Pattern, Int, Float, Bool))
    return True


def _choices_are(have: Type, kinds: tuple) -> bool:
    return isinstance(have, OneOf) and all(isinstance(c, kinds) and not isinstance(c, bool) for c in have.choices)


def item_type(t: Type) -> Type | None:
    """The type of a list's items; `any` for `any`; None when `t` is surely not a list."""
    if t.is_any or isinstance(t, SchemaFile):
        return ANY
    return t.item if isinstance(t, ListOf) else None


def flat(t: Type) -> Type:
    """The items' type once nested lists are flattened all the way (`foreach_flat`)."""
    while isinstance(t, ListOf):
        t = t.item
    return t


# ------------------------------------------------------------------ inference
def type_of_value(value: Any) -> Type | None:
    """The type a JSON value shows: None for an empty list's items (nothing to go by) and for
    objects and nulls (left `any`)."""
    if isinstance(value, bool):
        return Bool()
    if isinstance(value, int):
        return Int()
    if isinstance(value, float):
        return Float()
    if isinstance(value, str):
        return Str()
    if isinstance(value, list):
        item = None
        for v in value:
            item = join(item, type_of_value(v) or ANY)
        return ListOf(item if item is not None else _EMPTY)
    return ANY


class _Empty(AnyType):
    """The items of an empty list: joins to whatever other examples show."""


_EMPTY = _Empty()


def join(a: Type | None, b: Type | None) -> Type | None:
    """The narrowest type both `a` and `b` are; `any` when they have none in common."""
    if a is None or isinstance(a, _Empty):
        return b
    if b is None or isinstance(b, _Empty):
        return a
    if a == b:
        return a
    if {type(a), type(b)} == {Int, Float}:
        return Float()
    if isinstance(a, ListOf) and isinstance(b, ListOf):
        return ListOf(join(a.item, b.item) or ANY)
    return ANY


def infer(values) -> Type:
    """The type every one of `values` (examples' answers) shows; `any` when they disagree or
    there are none, and when one is text: a model's text answer may read as any JSON value
    (`A: Paris` says little; `A: ["Paris"]` says list[str])."""
    found: Type | None = None
    for value in values:
        if isinstance(value, str):
            return ANY
        found = join(found, type_of_value(value))
        if found is not None and found.is_any and not isinstance(found, _Empty):
            return ANY
    if found is None:
        return ANY
    if isinstance(found, ListOf) and isinstance(found.item, _Empty):
        return ListOf(ANY)
    return found


# ------------------------------------------------------------------ decoding
@dataclass(frozen=True, slots=True)
class Constraint:
    """What a model's reply must match, for constrained decoding: a JSON Schema (`schema`, as
    canonical JSON text) or a regular expression (`regex`, Rust `regex` syntax, which
    llguidance, vLLM and Python's `re` read alike for the forms decomp writes). Exactly one is
    set. It is part of the sample cache key (the session's sample key): a reply decoded under
    another constraint, or none, is another sample.

    `name` names it where a backend needs a name (OpenAI's `json_schema.name`). A completion
    may begin with blanks before the value (after `A:` a model writes ` ["a"]`): backends that
    decode under a constraint allow them."""

    schema: str | None = None
    regex: str | None = None
    name: str = "answer"

    def key(self) -> dict:
        """What stands for it in a cache key."""
        return {"schema": self.schema, "regex": self.regex}


def decoding(t: Type) -> tuple[str, str] | None:
    """How a model is constrained to write an answer of type `t`, as few-shot examples write
    answers: ("regex", r) for text written bare or as a JSON string (a pattern; choices that
    are all strings; a boolean as true/false/yes/no), ("schema", json) for JSON values
    (numbers, lists, objects, schema files, mixed choices); None for `any` and `str`, which any
    text is."""
    import re

    if t.is_any or isinstance(t, Str):
        return None
    if isinstance(t, Pattern):
        return "regex", _bare_or_quoted(t.regex)
    if isinstance(t, OneOf) and all(isinstance(c, str) for c in t.choices):
        return "regex", _bare_or_quoted("|".join(re.escape(c) for c in t.choices))
    if isinstance(t, Bool):
        return "regex", "true|false|yes|no"
    return "schema", t.schema_text


def _bare_or_quoted(regex: str) -> str:
    """`regex` as text written bare (`A: u`) or as a JSON string (`A: "u"`), as examples do."""
    return f'(?:{regex})|"(?:{regex})"'
