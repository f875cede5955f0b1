"""Hover shows the inferred type of `#n` and the declared type of `#name`
(editors/lsp/hover_types.py), from what the document and its prompt files say."""
from __future__ import annotations

from decomp.editors.lsp.features import hover
from decomp.editors.lsp.index import build_index

SRC = '''handler split = prompt(file="split.txt")
handler words = regex(pattern=r"\\S+", all=true)
handler yn = prompt(text="", returns=one_of("yes", "no"))
handler calc = calculator()

program p(question: str, n) {
    QS: [split] #question
    QS: (foreach) [calc] #1
    QS: [yn] is #2 ok?
    QS: [words] #n
}
'''


def hover_at(tmp_path, needle: str, line: int) -> str:
    (tmp_path / "split.txt").write_text('Q: a b\nA: ["a", "b"]\n')
    path = tmp_path / "t.decomp"
    path.write_text(SRC)
    lines = SRC.split("\n")
    found = hover(build_index(path, SRC), lines, line, lines[line].index(needle) + 1)
    return found[0]


def test_a_step_reference_shows_its_answer_type(tmp_path):
    assert "type `list[str]`" in hover_at(tmp_path, "#1", 7)  # from split.txt's examples
    assert "type `list[float]`" in hover_at(tmp_path, "#2", 8)  # a foreach of the calculator


def test_a_parameter_shows_its_declared_type(tmp_path):
    assert "type `str`" in hover_at(tmp_path, "#question", 6)
    assert "type `any`" in hover_at(tmp_path, "#n", 9)
