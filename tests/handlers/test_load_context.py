"""`LoadContext.resolve` returns the real path it checked (issue 14: the file was checked, then
read later through a path whose link could point elsewhere by then)."""
import pytest

from decomp.handlers.base import LoadContext
from decomp.handlers.sandbox.trust import PathRefused


def test_the_checked_real_path_is_what_is_read_even_after_the_link_moves(tmp_path):
    program = tmp_path / "prog"
    program.mkdir()
    (program / "real.txt").write_text("the program's prompt", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("a secret", encoding="utf-8")
    link = program / "prompt.txt"
    link.symlink_to(program / "real.txt")
    ctx = LoadContext(program, roots=(program.resolve(),))
    found = ctx.resolve("prompt.txt")
    assert found == (program / "real.txt").resolve() and found in ctx.files
    link.unlink()
    link.symlink_to(tmp_path / "secret.txt")  # swapped after the check, before the read
    assert found.read_text(encoding="utf-8") == "the program's prompt"
    with pytest.raises(PathRefused):  # checked again, the link is refused
        ctx.resolve("prompt.txt")


def test_an_unconfined_context_still_resolves_and_a_loop_is_left_to_the_read(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    ctx = LoadContext(tmp_path)
    found = ctx.resolve("loop")
    assert found.name == "loop"
    with pytest.raises(OSError):
        found.read_text()
