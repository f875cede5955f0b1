"""Candidates written as program folders: only file= options change, the handlers that cannot
be rewritten are named, imported modules are rewritten in their own file."""
from __future__ import annotations

import pytest

from decomp.dsl.errors import DecompError
from decomp.runtime.engine.session import Session
from decomp.learning.optimize.candidates import Candidate
from decomp.learning.optimize.folder import source_files, write_candidate
from decomp.learning.optimize.harvest import Demo
from decomp.learning.optimize.targets import find_targets
from decomp.runtime.testing.fake import FakeModel

from tests.learning.optimize.optimize_helpers import DECOMPOSER, write_program


def _load(path):
    return Session(model=FakeModel(default="x"), python_workers=False).load(path)


def test_only_the_file_options_change_and_the_folder_checks(tmp_path):
    path = write_program(tmp_path / "src")
    loaded = _load(path)
    targets, _ = find_targets(loaded, path.parent)
    demo = Demo("letter", 'Q: What is the first letter of "cat"?\nA: "c"', "q", "r1")
    main = write_candidate(source_files(loaded, path), path, targets, Candidate("c", {"letter": (demo,)}),
                           tmp_path / "cand")
    assert main == tmp_path / "cand" / "prog.decomp"
    written = main.read_text()
    assert written == DECOMPOSER.replace('file="prompts/letter.txt"', 'file="optimized/letter.txt"')
    examples = (tmp_path / "cand" / "optimized" / "letter.txt").read_text()
    assert examples == 'Q: What is the first letter of "owl"?\nA: "o"\n\nQ: What is the first letter of "cat"?\nA: "c"\n'
    assert sorted(p.relative_to(tmp_path / "cand").as_posix() for p in (tmp_path / "cand").rglob("*.txt")) == [
        "optimized/letter.txt", "prompts/join.txt", "prompts/letter.txt", "prompts/split.txt", "prompts/top.txt"]
    again = _load(main)  # an ordinary program that loads and checks
    assert again.handlers["letter"].fewshot_head()[0].count("Q: ") == 2
    only = write_candidate(source_files(loaded, path), path, targets, Candidate("c", {"letter": (demo,)}),
                           tmp_path / "only", keep_examples=False)
    assert (only.parent / "optimized" / "letter.txt").read_text() == demo.text + "\n"


SKIPPED = """
handler inline   = decomposer(examples="QC: one?\\nQS: [fine] one\\nA: 1\\nQS: [EOQ]\\n")
handler template = prompt(text="Say {{ query }}")
handler many     = prompt(file="prompts/split.txt", n=3, temperature=0.7)
handler fine     = prompt(file="prompts/split.txt")
program p(question) {
    QS: [template] #question
    QS: [many] #1
    QS: [fine] #1
}
main p
"""


def test_handlers_that_cannot_be_rewritten_are_named_with_why(tmp_path):
    path = write_program(tmp_path, source=SKIPPED)
    targets, skipped = find_targets(_load(path), tmp_path)
    assert set(targets) == {"fine"}
    assert "inline" in skipped["inline"] and "inline" in skipped["template"]
    assert "n=3" in skipped["many"]


def test_a_template_file_is_skipped(tmp_path):
    path = write_program(tmp_path, source='handler t = prompt(file="prompts/t.j2")\nmain t\n',
                         prompts={"t.j2": "Answer {{ query }}\n"})
    assert find_targets(_load(path), tmp_path)[1] == {"t": "a template, not few-shot examples"}


def test_an_imported_modules_handler_is_rewritten_in_its_own_file(tmp_path):
    write_program(tmp_path / "src", source=DECOMPOSER.replace("main top\n", ""), name="lib.decomp")
    path = tmp_path / "src" / "prog.decomp"
    path.write_text('import "lib.decomp"\nmain top\n')
    loaded = _load(path)
    targets, _ = find_targets(loaded, path.parent)
    assert targets["split"].declared_in == (tmp_path / "src" / "lib.decomp").resolve()
    demo = Demo("split", 'Q: What are the words in "x y"?\nA: ["x", "y"]', "q", "r1")
    main = write_candidate(source_files(loaded, path), path, targets, Candidate("c", {"split": (demo,)}),
                           tmp_path / "cand")
    assert main.read_text() == path.read_text()
    assert 'prompt(file="optimized/split.txt")' in (tmp_path / "cand" / "lib.decomp").read_text()
    assert _load(main).handlers["split"].fewshot_head()[0].endswith('A: ["x", "y"]\n\n')


def test_a_program_reading_files_outside_its_folder_is_refused(tmp_path):
    write_program(tmp_path)
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "prog.decomp"
    path.write_text(DECOMPOSER.replace('file="prompts/', 'file="../prompts/'))
    from decomp.handlers.sandbox.trust import Trust
    loaded = Session(model=FakeModel(default="x"), python_workers=False, trust=Trust.of(roots=[tmp_path]))
    module = loaded.load(path)
    targets, skipped = find_targets(module, path.parent)
    assert not targets and all("outside the program's folder" in why for why in skipped.values())
    with pytest.raises(DecompError, match="reads files outside its folder"):
        source_files(module, path)
