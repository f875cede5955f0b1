"""`decomp check` warns about templates whose output can grow without bound (a namespace
attribute built from itself twice in a loop, or through `*`/`|string`/`|tojson`; a macro calling
itself twice), at the template's line, inline or in a file, in text and in `--json`; and about
nothing else."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from decomp.handlers.sandbox.template_growth import growth_warnings
from decomp.runtime.cli import main

NS = "{% set s = namespace(v='x') %}\n"


@pytest.mark.parametrize("body, message", [
    ("{% set s.v = [s.v, s.v]|string %}", "`s.v` is built from itself twice in a loop"),
    ("{% set s.v = s.v ~ s.v ~ s.v %}", "`s.v` is built from itself 3 times in a loop"),
    ("{% set s.v = s.v|tojson %}", "`s.v` is built from itself through `|tojson` in a loop"),
    ("{% set s.v = (s.v|string)|upper %}", "`s.v` is built from itself through `|string` in a loop"),
    ("{% set s.v = s.v * 2 %}", "`s.v` is built from itself through `*` in a loop"),
    ("{% if i %}{% set s.v %}{{ s.v }}{{ s.v }}{% endset %}{% endif %}", "`s.v` is built from itself twice in a loop"),
])
def test_a_namespace_attribute_growing_from_itself_in_a_loop_is_warned_at_its_line(body, message):
    found = growth_warnings(NS + "{% for i in range(n) %}\n" + body + "\n{% endfor %}{{ s.v }}")
    assert found == [(3, f"output can grow without bound: {message}")]


def test_a_macro_calling_itself_twice_is_warned():
    src = "x\n{% macro f(k) %}{% if k %}{{ f(k - 1) }}{{ f(k - 1) }}{% endif %}{% endmacro %}{{ f(9) }}"
    assert growth_warnings(src) == [(2, "output can grow without bound: macro `f` calls itself twice, so its "
                                        "calls double at every level")]


@pytest.mark.parametrize("src", [
    NS + "{% for i in range(n) %}{% set s.v = s.v ~ 'x' %}{% endfor %}",  # grows by one each time: bounded
    NS + "{% for i in range(n) %}{% set x = [s.v, s.v] %}{% set s.w = s.v ~ s.v %}{% endfor %}",  # not itself
    "{% set x = 'a' %}{% for i in range(n) %}{% set x = x ~ x %}{{ x }}{% endfor %}",  # Jinja resets x each time
    NS + "{% set s.v = s.v ~ s.v %}",  # no loop
    "{% macro f(k) %}{% if k %}{{ f(k - 1) }}{% endif %}{% endmacro %}{{ f(3) }}",
    "{% for x in y %}",  # does not parse: the check's error, not a warning
    (__import__("pathlib").Path(__file__).resolve().parents[3] / "programs/odqa/prompts/multi_hop.j2").read_text(),
])
def test_ordinary_templates_get_no_warning(src):
    assert growth_warnings(src) == []


INLINE = ('handler h = prompt(text="{% set s = namespace(v=\'x\') %}{% for i in range(query|length) %}'
          '{% set s.v = [s.v, s.v]|string %}{% endfor %}{{ s.v|length }}", template=true)\n')


def _program(tmp_path):
    (tmp_path / "grow.j2").write_text("Q: {{ query }}\n{% set s = namespace(v='\"') %}\n{% for i in range(9) %}\n"
                                      "{% set s.v = s.v|tojson %}\n{% endfor %}\n")
    program = tmp_path / "bomb.decomp"
    program.write_text(INLINE + 'handler g = prompt(file="grow.j2")\nhandler ok = prompt(text="Q: {{ query }}")\n'
                       "program p(question) {\n    QS: [h] #question\n    QS: [g] #1\n    QS: [ok] #2\n}\nmain p\n")
    return program


def test_decomp_check_shows_template_warnings_and_passes(tmp_path):
    program = _program(tmp_path)
    result = CliRunner().invoke(main, ["check", str(program)])
    assert result.exit_code == 0, result.output
    assert f"{program}: ok (2 warnings)" in result.output
    assert (f"{program}:1:25: warning: template of [h], line 1: output can grow without bound: `s.v` is built "
            "from itself twice in a loop") in result.output
    assert (f"{tmp_path / 'grow.j2'}:4:1: warning: template of [g], line 4: output can grow without bound: `s.v` "
            "is built from itself through `|tojson` in a loop") in result.output
    assert "    {% set s.v = s.v|tojson %}\n    ^^^" in result.output  # the file's own line, underlined


def test_decomp_check_json_lists_template_warnings(tmp_path):
    program = _program(tmp_path)
    result = CliRunner().invoke(main, ["check", str(program), "--json"])
    assert result.exit_code == 0, result.output
    warnings = json.loads(result.stdout)["warnings"]
    assert [(w["at"], w["line"], w["column"]) for w in warnings] == [
        (f"{program}:1:25", 1, 25), (f"{tmp_path / 'grow.j2'}:4:1", 4, 1)]
    assert all(w["message"].startswith("template of [") and "grow without bound" in w["message"] for w in warnings)
    assert "time limit" in warnings[0]["expected"]


def test_a_multi_line_template_is_warned_at_its_own_line_of_the_decomp_file(tmp_path):
    program = tmp_path / "m.decomp"
    program.write_text('handler h = prompt(text="""Q: {{ query }}\n{% set s = namespace(v=1) %}\n'
                       '{% for i in range(3) %}{% set s.v = s.v * s.v %}{% endfor %}""", template=true)\nmain h\n')
    result = CliRunner().invoke(main, ["check", str(program)])
    assert result.exit_code == 0, result.output
    assert f"{program}:3:1: warning: template of [h], line 3: output can grow without bound: `s.v` is built from " \
           "itself twice in a loop" in result.output


def test_a_score_prefix_template_is_warned_at_its_option(tmp_path):
    program = tmp_path / "s.decomp"
    program.write_text('handler s = score(prefix="{% macro f(k) %}{{ f(k) }}{{ f(k) }}{% endmacro %}{{ query }}")\n'
                       "main s\n")
    result = CliRunner().invoke(main, ["check", str(program)])
    assert result.exit_code == 0, result.output
    assert f"{program}:1:26: warning: template of [s], line 1: output can grow without bound: macro `f` calls " \
           "itself twice" in result.output
