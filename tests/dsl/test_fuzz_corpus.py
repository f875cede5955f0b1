"""The fuzz corpus (tests/dsl/fuzz_corpus/, issue 14): every hostile input found so far, each
through the parser's entry points, the checker and `decomp check --json` (the real command);
a Hypothesis fuzz of the same entry points with a fixed, derandomized budget; and the fuzz
script (benchmarks/fuzz.py) on a few inputs.

An input may be refused, but only with the project's own error, positioned (file:line:col);
never with another exception."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.fuzz import VOCABULARY, load_seeds, mutate
from decomp.dsl.errors import DecompError
from decomp.dsl.parser import parse_fewshot, parse_module, parse_plan, parse_step_line
from decomp.dsl.plans import order_text, read_plan
from decomp.runtime.cli import main as cli
from decomp.runtime.engine.session import Session

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).parent / "fuzz_corpus"
KINDS = {".decomp": "module", ".txt": "fewshot", ".plan": "plan", ".step": "step"}
FILES = sorted(p.name for p in CORPUS.iterdir() if p.suffix in KINDS)

#: What `decomp check` says of a corpus file: None (clean), or (line, column, words of the message)
#: of its first error. The nesting errors sit on the construct one level past the limit.
CHECK = {
    "if_nested_250.decomp": (104, 1, "`if` block nested too deeply"),
    "list_nested_400.decomp": (1, 140, "list nested too deeply"),
    "condition_nested_400.decomp": (4, 1207, "`and` condition nested too deeply"),
    "not_nested_600.decomp": (4, 406, "`not` condition nested too deeply"),
    "compare_nested_300.decomp": (4, 107, "comparison nested too deeply"),
    "if_nested_100.decomp": None,
    "json_answer_nested_1000.txt": None,
    "cr_only.decomp": None,
    "cr_only.txt": None,
    "crlf_and_cr_mixed.decomp": None,
    "cr_error_line_4.decomp": (4, 7, "unclosed `[`"),
    "surrogate_bytes.txt": (1, 7, "not UTF-8"),
    "surrogate_escape_bytes.txt": (1, 7, "not UTF-8"),
    "surrogate_escapes.decomp": None,
    "surrogate_in_error.decomp": (1, 46, "unexpected ')'"),
    "inline_fewshot_error.decomp": (5, 5, "unclosed `[`"),
    "many_broken_chunks.decomp": (2, 1, "unexpected 'handler'"),
    "many_broken_examples.txt": (1, 5, "unclosed `[`"),
    "misindented_brace.decomp": (6, 1, "unexpected 'program'"),
    # file names no file can have, written as escapes (old: UnicodeEncodeError from program(file=...))
    "impossible_file_names.decomp": (1, 25, "prompt file not found"),
    # what other libraries parse in a handler's check (Jinja, regular expressions; old: RecursionError)
    "template_nested_3000.decomp": (1, 1, "[h] cannot be checked: a template, pattern or expression in it is nested"),
    "pattern_nested_3000.decomp": (1, 1, "[r] cannot be checked"),
    # JSON-looking text nested past Python's stack (old: RecursionError while guessing what the file is)
    "raw_json_nested_3000.txt": None,
    "raw_json_nested_3000.decomp": (1, 1, "unexpected handler reference '[[["),
    # template bombs (issue 29 B2): accepted, with a warning that the output can grow without bound
    "template_bomb_string.decomp": None,
    "template_bomb_tojson.decomp": None,
}


def _positioned(err: DecompError) -> None:
    """Every error in `err` has a span inside its text and formats as the CLI prints it."""
    for e in getattr(err, "errors", None) or [err]:
        assert e.span is not None and e.span.line >= 1 and e.span.column >= 1, e
    err.format()


def _entry_points(kind: str, text: str, tmp_path: Path) -> None:
    """Every entry point that fits `kind`, on `text` (lone surrogates included)."""
    calls = {"module": [parse_module, lambda t: Session().load(tmp_path / "text.decomp", t)],
             "fewshot": [parse_fewshot], "plan": [parse_plan, lambda t: order_text(read_plan(t)[0].execution_order())],
             "step": [parse_step_line]}[kind]
    calls = calls + [parse_fewshot, parse_step_line] if kind in ("module", "plan") else calls
    for call in calls:
        try:
            call(text)
        except DecompError as err:
            _positioned(err)


def test_every_corpus_file_has_an_expected_outcome():
    assert set(CHECK) == {name for name in FILES if KINDS[Path(name).suffix] in ("module", "fewshot")}


@pytest.mark.parametrize("name", FILES)
def test_corpus_input_through_every_entry_point(name, tmp_path):
    data = (CORPUS / name).read_bytes()
    _entry_points(KINDS[Path(name).suffix], data.decode("utf-8", "surrogateescape"), tmp_path)


@pytest.mark.parametrize("name", [n for n in FILES if n in CHECK])
@pytest.mark.parametrize("file_name", ["plain", "not UTF-8"])
def test_corpus_file_through_check_json(name, file_name, tmp_path):
    """The real `decomp check --json FILE`: rc 0 with JSON, or rc 1 with a positioned error."""
    suffix = Path(name).suffix
    path = tmp_path / (Path(name).stem + suffix if file_name == "plain" else "caf\udce9 \udcff" + suffix)
    path.write_bytes((CORPUS / name).read_bytes())
    result = CliRunner().invoke(cli, ["check", "--json", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    expected = CHECK[name]
    if expected is None:
        assert result.exit_code == 0, result.stderr
        json.loads(result.stdout)
        return
    line, column, words = expected
    assert result.exit_code == 1 and result.stdout == ""
    first = result.stderr.splitlines()[0]
    assert f":{line}:{column}: " in first and words in first, first


def test_inline_surrogates_reach_the_json_escaped(tmp_path):
    """Lone surrogates written as escapes in strings: checked, and printed as JSON escapes."""
    result = CliRunner().invoke(cli, ["check", "--json", str(CORPUS / "surrogate_escapes.decomp")])
    assert result.exit_code == 0, result.stderr
    assert "\\ud800" in result.stdout and json.loads(result.stdout)["node"] == "Module"


def test_impossible_file_names_are_each_a_positioned_error(tmp_path):
    path = tmp_path / "names.decomp"
    path.write_bytes((CORPUS / "impossible_file_names.decomp").read_bytes())
    result = CliRunner().invoke(cli, ["check", str(path)])
    assert result.exit_code == 1 and isinstance(result.exception, (SystemExit, type(None)))
    assert ":6:26: bad program file path: " in result.stderr and ":4:1: bad import path: " in result.stderr


@pytest.mark.parametrize("name", ["\ud800.decomp", "a\x00b.decomp", "\udfff.txt", "a\x00b.txt"])
def test_a_name_no_file_can_have_is_refused_by_check(name, tmp_path):
    from decomp.runtime.engine.checking import check_file

    with pytest.raises(DecompError) as info:
        check_file(tmp_path / name)
    assert info.value.message.startswith("no file can have this name") and info.value.span.line == 1
    info.value.format()


# ------------------------------------------------------------------ Hypothesis
SEEDS = load_seeds()
FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(rng=st.randoms(use_true_random=False), kind=st.sampled_from(["module", "fewshot", "step", "plan"]))
def test_fuzz_mutated_seeds(rng, kind, tmp_path_factory):
    """Grammar-aware mutations (benchmarks/fuzz.py's) of the bundled programs, prompts and corpus."""
    text = mutate(rng, rng.choice(SEEDS[kind]), SEEDS)
    _entry_points(kind, text, tmp_path_factory.getbasetemp())


structured = st.lists(st.sampled_from(VOCABULARY) | st.text(max_size=4), max_size=60).map("".join)


@FUZZ
@given(text=structured, kind=st.sampled_from(["module", "fewshot", "step", "plan"]))
def test_fuzz_grammar_tokens(text, kind, tmp_path_factory):
    """Texts made of the grammar's own tokens (and odd characters, lone surrogates included)."""
    _entry_points(kind, text, tmp_path_factory.getbasetemp())


@pytest.mark.slow
def test_fuzz_script_reports_one_json_line(tmp_path):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the script must find `benchmarks` by itself
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "fuzz.py"), "--inputs", "40", "--workers", "1",
                           "--save", str(tmp_path / "found")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout.strip())
    assert record["benchmark"] == "fuzz" and record["inputs"] == 40
    assert record["crashes"] == 0 and record["hangs"] == 0, proc.stderr
    assert record["seconds"] > 0 and not (tmp_path / "found").exists()
