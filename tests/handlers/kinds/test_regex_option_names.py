"""The regex kind's option is written `json=` (its pydantic field is `parse_json`, an alias:
`json` would shadow a BaseModel method). Every place that names a kind's options names them as a
.decomp file writes them: the unknown-option error's list, the type error, the language
server's completion and hover. `parse_json=` never worked and is not accepted."""
from __future__ import annotations

import pytest

from decomp import Session
from decomp.dsl.errors import DecompError
from decomp.handlers.kinds.regex import RegexHandler
from decomp.editors.lsp.completion import complete
from decomp.editors.lsp.features import kind_markdown

PROGRAM = 'handler r = regex(pattern="(\\\\[.*\\\\])", {option})\nprogram p(question) {{\n    QS: [r] #question\n}}\nmain p\n'


def _load(tmp_path, option: str):
    path = tmp_path / "p.decomp"
    path.write_text(PROGRAM.format(option=option))
    session = Session()
    return session, session.load(path)


def _error(tmp_path, option: str) -> str:
    with pytest.raises(DecompError) as caught:
        _load(tmp_path, option)
    return caught.value.format()


def test_written_options_name_the_alias():
    written = RegexHandler.Options.written_options()
    assert "json" in written and "parse_json" not in written
    assert written["json"].annotation is bool


def test_an_unknown_option_lists_json_as_written(tmp_path):
    message = _error(tmp_path, "bogus=1")
    assert "unknown option 'bogus'" in message
    assert "default, json" in message and "parse_json" not in message


def test_parse_json_is_refused_pointing_at_json(tmp_path):
    message = _error(tmp_path, "parse_json=true")
    assert "unknown option 'parse_json'" in message and ", json" in message and "1:" in message


def test_a_wrong_type_for_json_names_its_type(tmp_path):
    message = _error(tmp_path, "json=1")
    assert "option 'json' of kind 'regex'" in message and "a value of type bool" in message


def test_json_true_parses_the_match(tmp_path):
    session, module = _load(tmp_path, "json=true")
    assert session.run(module, {"question": "the list [1, 2] here"}).answer == [1, 2]


def test_the_language_server_completes_and_describes_json():
    line = 'handler r = regex(pattern="x", '
    labels = [item.label for item in complete(None, line, [line], 0, len(line))]
    assert "json" in labels and "parse_json" not in labels
    assert "`json`: `bool" in kind_markdown("regex") and "parse_json" not in kind_markdown("regex")
