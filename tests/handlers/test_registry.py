"""Third-party kinds and functions register exactly like built-ins: decorator or entry point."""
import sys
import textwrap

import pytest

from decomp import Handler, Options, Session
from decomp.handlers.plugins import builtin_registry, load as load_plugins, refresh
from decomp.handlers.registry import handler_kind, python_handler


class ShoutOptions(Options):
    suffix: str = "!"


def test_decorated_kind_is_used_like_a_builtin(tmp_path):
    reg = builtin_registry()

    @handler_kind("shout", registry=reg)
    class Shout(Handler):
        Options = ShoutOptions

        async def run(self, call):
            return call.query.upper() + self.options.suffix

    session = Session(registry=reg)
    module = session.load("x.decomp", text='handler loud = shout(suffix="!!")\n'
                                           'program p(question) {\n    QS: [loud] #question\n}\nmain p\n')
    assert session.run(module, {"question": "hi"}).answer == "HI!!"
    assert "shout" not in load_plugins().kinds


def test_custom_kind_options_are_checked_like_builtins():
    reg = builtin_registry()

    @handler_kind("shout", registry=reg)
    class Shout(Handler):
        Options = ShoutOptions

    with pytest.raises(Exception) as caught:
        Session(registry=reg).load("x.decomp", text="handler loud = shout(volume=3)\n")
    assert "x.decomp:1:22: unknown option 'volume' for kind 'shout'" in str(caught.value)


def test_decorated_python_function(tmp_path):
    reg = builtin_registry()
    python_handler("twice", registry=reg)(lambda query: query * 2)
    session = Session(registry=reg)
    module = session.load("x.decomp", text='handler t = python(function="twice")\n'
                                           "program p(question) {\n    QS: [t] #question\n}\nmain p\n")
    assert session.run(module, {"question": "ab"}).answer == "abab"


def test_entry_point_group_registers_kinds_and_functions(tmp_path, monkeypatch):
    """A real installed distribution (a dist-info folder on sys.path) naming its plugin module in
    the group `decomp`."""
    (tmp_path / "decomp_plugin_demo.py").write_text(textwrap.dedent('''
        from decomp import Handler, hookimpl

        class Reverse(Handler):
            kind = "reverse_text"
            async def run(self, call):
                return call.query[::-1]

        def count_words(query):
            return len(query.split())

        @hookimpl
        def register_kinds(register):
            register(Reverse)

        @hookimpl
        def register_functions(register):
            register(count_words)
    '''))
    info = tmp_path / "decomp_plugin_demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: decomp-plugin-demo\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[decomp]\ndecomp_plugin_demo = decomp_plugin_demo\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    refresh()  # installed after this process read the entry points
    reg = builtin_registry()
    session = Session(registry=reg)
    module = session.load("x.decomp", text=(
        'handler rev = reverse_text\nhandler n = python(function="count_words")\n'
        "program p(question) {\n    QS: [rev] #question\n    QS: [n] #question\n    QS: [rev] #2\n}\nmain p\n"))
    assert session.run(module, {"question": "one two three"}).answer == "3"
    assert reg.kind("reverse_text").__name__ == "Reverse"
    sys.modules.pop("decomp_plugin_demo", None)
    monkeypatch.undo()
    refresh()
