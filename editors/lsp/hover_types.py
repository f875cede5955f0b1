"""The types hover shows for `#n` and `#name` (`decomp.dsl.answer_types`): each handler's answer type
from what the document says, without running anything. A declared `returns=` or `-> T` is
read as written; without one, the built-in kinds that infer a type from what they are given
(a prompt's `A:` examples, read from its file inside the program's folders; a regex; the
calculator) say it; every other handler answers `any`. A handler of an imported file is `any`."""
from __future__ import annotations

from pydantic import ValidationError

from decomp.dsl import nodes
from decomp.dsl.errors import DecompError
from decomp.dsl.typecheck import step_types
from decomp.dsl.answer_types import ANY, Type, TypeProblem, parse_type
from decomp.handlers.base import LoadContext
from decomp.handlers.plugins import load as kinds_table
from decomp.editors.lsp.index import Index

#: The kinds whose type is inferred on hover: built in, and reading nothing but text.
INFERRING_KINDS = ("prompt", "regex", "calculator")


def ref_type(index: Index, program: nodes.Program, ref: str) -> Type:
    """The type of `#n` (a step's answer) or `#name` (a parameter) inside `program`."""
    name = ref[1:]
    if not name.isdigit():
        param = next((p for p in program.params if p.name == name), None)
        return _read(param.type) if param is not None else ANY
    answers = {decl.name: _decl_type(index, decl) for decl in index.decls.values()}
    params = {p.name: _read(p.type) for p in program.params}
    return step_types(program, answers, params).get(int(name), ANY)


def _read(value: nodes.Value | None) -> Type:
    try:
        return ANY if value is None else parse_type(value.value)
    except TypeProblem:
        return ANY


def _decl_type(index: Index, decl) -> Type:
    node = decl.node
    if isinstance(node, nodes.Program):
        return _read(node.result)
    if not isinstance(node, nodes.HandlerDecl) or node.span.file != str(index.path):
        return ANY
    returns = node.option("returns")
    if returns is not None:
        return _read(returns.value)
    return _inferred(index, node) if node.kind in INFERRING_KINDS else ANY


def _inferred(index: Index, node: nodes.HandlerDecl) -> Type:
    cls = kinds_table().kind(node.kind)
    if cls is None:
        return ANY
    try:
        options = cls.Options(**{o.name: o.value.plain() for o in node.options})
        ctx = LoadContext(index.path.parent, roots=index.roots)
        return cls(node.name, options, node, ctx).inferred_type()
    except (ValidationError, DecompError, OSError, ValueError, RecursionError):
        return ANY
