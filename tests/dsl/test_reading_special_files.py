"""Source files that are not regular files: a FIFO (no writer ever opens it), a device, a
folder. `read_text` refuses the first two unread, without waiting (an `import` of a FIFO once
hung `decomp check` and the language server's checker for good)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from decomp.dsl.errors import DecompError
from decomp.dsl.parser import not_read, read_text, special_file


def _read_within(path: Path, seconds: float = 10.0):
    """`read_text(path)`'s result or exception, failing the test if it waits (a writer then
    opens the FIFO so that the reading thread ends)."""
    outcome: list = []

    def read():
        try:
            outcome.append(read_text(path))
        except Exception as err:
            outcome.append(err)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        with open(path, "wb"):
            pass
        raise AssertionError(f"read_text({path}) waited")
    return outcome[0]


def test_a_fifo_is_refused_unread_and_without_waiting(tmp_path):
    fifo = tmp_path / "pipe.decomp"
    os.mkfifo(fifo)
    refused = _read_within(fifo)
    assert isinstance(refused, DecompError)
    assert refused.message == f"{fifo} is a FIFO (named pipe), not a regular file: it is not read"
    assert (refused.span.file, refused.span.line, refused.line_text) == (str(fifo), 1, "")
    link = tmp_path / "link.decomp"
    link.symlink_to(fifo)
    assert "is a FIFO" in _read_within(link).message
    assert special_file(link) == "a FIFO (named pipe)"


def test_a_device_is_refused_and_a_folder_is_the_oserror_it_was(tmp_path):
    refused = _read_within(Path("/dev/zero"))
    assert isinstance(refused, DecompError) and "/dev/zero is a character device" in refused.message
    assert isinstance(_read_within(tmp_path), IsADirectoryError)
    assert isinstance(_read_within(tmp_path / "missing.decomp"), FileNotFoundError)
    (tmp_path / "ok.decomp").write_text("main h\n", encoding="utf-8")
    assert _read_within(tmp_path / "ok.decomp") == "main h\n"
    assert special_file(tmp_path / "ok.decomp") is None and special_file(tmp_path) is None


def test_why_a_file_is_not_read(tmp_path):
    os.mkfifo(tmp_path / "pipe.decomp")
    assert not_read(tmp_path / "pipe.decomp", "imported file") == \
        f"imported file {tmp_path / 'pipe.decomp'} is a FIFO (named pipe), not a regular file: it is not read"
    assert not_read(tmp_path / "gone.decomp", "imported file") == f"imported file not found: {tmp_path / 'gone.decomp'}"
    assert not_read(tmp_path, "imported file") == \
        f"imported file {tmp_path} is a folder, not a regular file: it is not read"


def test_reading_a_folder_leaves_no_descriptor_open(tmp_path):
    """A folder is opened (no `stat` refuses it first), then found to be one: its descriptor is
    closed (once 50 reads held 50 descriptors, and a language server hovering on a folder ran
    out of them)."""
    (tmp_path / "ok.decomp").write_text("main h\n", encoding="utf-8")
    os.mkfifo(tmp_path / "pipe.decomp")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        with pytest.raises(IsADirectoryError):
            read_text(tmp_path)
        with pytest.raises(DecompError):
            read_text(Path("/dev/null"))
        assert read_text(tmp_path / "ok.decomp") == "main h\n"
    assert len(os.listdir("/proc/self/fd")) == before


def test_an_import_of_a_folder_says_it_is_one(tmp_path):
    from decomp.runtime.engine.checking import check_file

    (tmp_path / "sub.decomp").mkdir()
    (tmp_path / "main.decomp").write_text('import "sub.decomp"\nhandler h = regex(pattern="(x)")\nmain h\n',
                                          encoding="utf-8")
    with pytest.raises(DecompError) as raised:
        check_file(tmp_path / "main.decomp")
    said = f"imported file {tmp_path / 'sub.decomp'} is a folder, not a regular file: it is not read"
    assert said in str(raised.value)


@pytest.mark.slow
def test_decomp_check_of_a_program_that_imports_a_fifo_says_so_at_the_import(tmp_path):
    os.mkfifo(tmp_path / "pipe.decomp")
    (tmp_path / "main.decomp").write_text('import "pipe.decomp"\nhandler h = regex(pattern="(x)")\nmain h\n')
    done = subprocess.run([sys.executable, "-m", "decomp", "check", "main.decomp"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith(f"main.decomp:1:1: imported file {tmp_path / 'pipe.decomp'} is a FIFO (named pipe), "
                                  "not a regular file: it is not read\n")
    assert "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, "-m", "decomp", "check", "pipe.decomp"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "pipe.decomp is a FIFO (named pipe), not a regular file" in done.stderr


@pytest.mark.parametrize("declaration", ['prompt(file="pipe.txt")', 'program(file="pipe.txt")'])
def test_a_prompt_or_program_file_that_is_a_fifo_is_said_to_be_one(tmp_path, declaration):
    from decomp.runtime.engine.checking import check_file

    os.mkfifo(tmp_path / "pipe.txt")
    (tmp_path / "main.decomp").write_text(f"handler h = {declaration}\nmain h\n", encoding="utf-8")
    result: list = []

    def check():
        try:
            check_file(tmp_path / "main.decomp")
        except DecompError as err:
            result.append(str(err))

    thread = threading.Thread(target=check, daemon=True)
    thread.start()
    thread.join(30)
    if thread.is_alive():
        with open(tmp_path / "pipe.txt", "wb"):
            pass
        raise AssertionError("the check waited on the FIFO")
    assert result and f"file {tmp_path / 'pipe.txt'} is a FIFO (named pipe), not a regular file: it is not read" \
        in result[0], result
