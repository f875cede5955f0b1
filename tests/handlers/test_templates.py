"""The one Jinja environment (decomp.handlers.templates): sandboxed as before, and bounded: huge
powers, repetitions, widths, joins and loops are refused at once, output is capped, compiling
never folds a bomb, and every kind that renders templates uses it, off the event loop."""
from __future__ import annotations

import time

import pytest
from jinja2 import TemplateError

import decomp.handlers.kinds  # noqa: F401
from decomp.handlers.kinds import executor, prompt, score
from decomp.handlers.templates import JINJA, MAX_LOOP, MAX_TEXT, TemplateLimitError
from decomp.runtime.engine.session import Session
from decomp.runtime.testing.fake import FakeModel

BOMBS = {
    "power": "{{ 9**(9**9) }}",
    "repeat": "{{ 'a' * 10**9 }}",
    "repeat list": "{{ ([1] * 10**8)|length }}",
    "nested loops": "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
    "output": "{% for i in range(99999) %}{{ 'x' * 100 }}{% endfor %}",
    "doubling ~": "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
                  "{% endfor %}{{ ns.s|length }}",
    "doubling +": "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
                  "{% endfor %}{{ ns.s|length }}",
    "squaring": "{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}{% endfor %}",
    "center filter": "{{ 'a'|center(10**9) }}",
    "ljust method": "{{ 'a'.ljust(10**9) }}",
    "format width": "{{ '{:>999999999}'.format(1) }}",
    "percent width": "{{ '%999999999d' % 1 }}",
    "format filter": "{{ '%999999999d'|format(1) }}",
    "replace": "{{ ('a' * 999999)|replace('', 'b' * 999) }}",
    "replace method": "{{ ('a' * 999999).replace('a', 'bb') }}",
    "join": "{{ (['a' * 999999] * 1000)|join(',') }}",
    "expandtabs": "{{ ('\t' * 999999).expandtabs(999) }}",
    "indent": "{{ ('\n' * 999999)|indent('x' * 999) }}",
    "lipsum": "{{ lipsum(n=10**8) }}",
    "set block": "{% set x %}{% for i in range(99999) %}{{ 'y' * 99 }}{% endfor %}{% endset %}{{ x|length }}",
    "macro": "{% macro f() %}{{ 'z' * 999999 }}{% endmacro %}{{ f() ~ f() }}",
}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_template_that_would_build_too_much_is_refused_at_once(name):
    started = time.monotonic()
    template = JINJA.from_string(BOMBS[name])  # compiling folds nothing dangerous
    with pytest.raises(TemplateLimitError):
        template.render(query="q", values=[])
    assert time.monotonic() - started < 5  # each of these ran for minutes (or ran out of memory) before


def test_ordinary_templates_render_as_before():
    src = ("{% for x in values %}{{ loop.index }}:{{ x }} {% endfor %}{{ query ~ '!' }} {{ 2 ** 10 }} "
           "{{ 'ab' * 3 }} {{ '%5.1f' % 3.14159 }} {{ '{:>4}'.format(7) }} {{ values|join('+') }} "
           "{{ 'a b'.replace(' ', '_') }} {{ [1, 2] + [3] }} {{ 'x'|center(5) }}|{% macro m(v) %}<{{ v }}>{% endmacro %}"
           "{{ m(1) }}")
    out = JINJA.from_string(src).render(query="q", values=[1, 2])
    assert out == "1:1 2:2 q! 1024 ababab   3.1    7 1+2 a_b [1, 2, 3]   x  |<1>"


def test_the_limits_allow_what_they_promise():
    assert len(JINJA.from_string("{{ 'a' * n }}").render(n=MAX_TEXT)) == MAX_TEXT
    src = "{% for i in range(n) %}{% endfor %}ok"
    assert JINJA.from_string(src).render(n=MAX_LOOP) == "ok"
    with pytest.raises(TemplateLimitError, match=f"loops ran over {MAX_LOOP:,} iterations"):
        JINJA.from_string("{% for i in range(n) %}{% for j in range(2) %}{% endfor %}{% endfor %}").render(n=MAX_LOOP)


def test_each_render_counts_its_own_loops():
    template = JINJA.from_string("{% for i in range(60000) %}{% endfor %}done")
    assert [template.render() for _ in range(3)] == ["done"] * 3


def test_the_sandbox_still_blocks_python_internals():
    with pytest.raises(TemplateError):
        JINJA.from_string("{{ ''.__class__.__mro__[1].__subclasses__() }}").render()
    with pytest.raises(TemplateError):
        JINJA.from_string("{{ values.append(1) }}").render(values=[])  # immutable sandbox


def test_every_kind_renders_in_the_one_environment():
    assert prompt.JINJA is executor.JINJA is score.JINJA is JINJA


def test_a_prompt_template_bomb_fails_its_row_and_is_checked_quickly(tmp_path):
    src = ('handler h = prompt(text="{{ 9**(9**9) }} {{ query }}", template=true)\n'
           'program p(question) {\n    QS: [h] #question\n}\nmain p\n')
    session = Session(model=FakeModel(answers=["1"]))
    started = time.monotonic()
    module = session.load(tmp_path / "main.decomp", text=src)  # the check compiles the template
    result = session.run(module, {"question": "q"})
    assert time.monotonic() - started < 5
    assert result.error is not None
    assert "[h] prompt" in result.error and "template: TemplateLimitError: a power of over 4,000 digits" in result.error


def test_a_slow_prompt_template_runs_into_the_handlers_timeout(tmp_path):
    # within every size limit, but slow (about half a second): it runs off the loop, under timeout=
    src = ('handler h = prompt(text="{% for i in range(1000) %}{{ (query * 4000)|upper|length }}{% endfor %}", '
           'template=true, timeout=0.05)\nprogram p(question) {\n    QS: [h] #question\n}\nmain p\n')
    session = Session(model=FakeModel(answers=["1"]))
    module = session.load(tmp_path / "main.decomp", text=src)
    result = session.run(module, {"question": "q" * 200})
    assert result.error is not None
    assert "the template ran longer than its time limit of 0.05 s" in result.error
