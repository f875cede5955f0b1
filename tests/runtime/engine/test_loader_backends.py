"""Tests of decomp.runtime.engine.loader's model declarations: every scheme is checked by its own
backend (`Backend.check`, asked the same way whichever plugin registered it); the loader names
no scheme, `fake:` included."""
from __future__ import annotations

import pytest

from decomp.dsl.errors import CheckWarning, DecompError
from decomp.handlers.plugins import builtin_registry
from decomp.runtime.engine.session import Session
from decomp.runtime.models.base import Backend, SpecCheck
from decomp.runtime.testing.fake import FakeModel

PROGRAM = '''handler ask = prompt(text="Q: {{{{ query }}}}\\nA:", max_tokens=8)
model default = "{spec}"
main ask
'''


class Shouting(Backend):
    """A third party's backend: names are upper-cased, the folder recorded, `bad` refused and
    `odd` warned of."""

    def __init__(self):
        self.seen = []

    def __call__(self, name, settings=None):
        return FakeModel(default=f"{name} says {dict(settings.options)['where']}")

    def check(self, name, ctx):
        self.seen.append((name, ctx.base_dir, ctx.trust))
        found = SpecCheck(name.upper(), {"where": ctx.base_dir.name})
        if name == "bad":
            found.errors.append("no model is called bad")
        if name == "odd":
            found.warnings.append("odd is an odd name")
        return found


def load(tmp_path, spec: str, registry):
    path = tmp_path / "prog.decomp"
    path.write_text(PROGRAM.format(spec=spec))
    session = Session(registry=registry)
    return session, session.load(path)


@pytest.fixture
def shouting():
    registry = builtin_registry()
    backend = Shouting()
    registry.add_model_backend("shout", backend, owner="test")
    return registry, backend


def test_a_backends_check_decides_the_spec_and_adds_its_options(tmp_path, shouting):
    registry, backend = shouting
    session, module = load(tmp_path, "shout:hello", registry)
    assert module.model_decls["default"] == ("shout:HELLO", {"where": tmp_path.name})
    assert backend.seen == [("hello", tmp_path, session.trust)]
    assert session.run(module, {"question": "hi"}).answer == f"HELLO says {tmp_path.name}"


def test_a_backends_errors_and_warnings_stand_at_the_declaration(tmp_path, shouting):
    registry, _ = shouting
    with pytest.raises(DecompError, match="no model is called bad") as caught:
        load(tmp_path, "shout:bad", registry)
    assert (caught.value.span.line, caught.value.span.column) == (2, 1)
    _, module = load(tmp_path, "shout:odd", registry)
    [warning] = module.notices
    assert isinstance(warning, CheckWarning) and warning.message == "odd is an odd name"
    assert warning.span.line == 2


def test_a_plain_factory_is_taken_as_written(tmp_path):
    registry = builtin_registry()
    registry.add_model_backend("plain", lambda name, settings: FakeModel(default=name), owner="test")
    session, module = load(tmp_path, "plain:some/where.json", registry)
    assert module.model_decls["default"] == ("plain:some/where.json", {})
    assert session.run(module, {"question": "hi"}).answer == "some/where.json"


def test_fake_is_a_scheme_like_any_other(tmp_path):
    registry = builtin_registry()
    del registry.model_backends["fake"]
    with pytest.raises(DecompError, match="unknown model backend 'fake'") as caught:
        load(tmp_path, "fake:answers.json", registry)
    assert "fake" not in caught.value.expected.split("one of: ")[1].split(", ")
