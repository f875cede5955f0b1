"""`decomp tune --out FILE` replaces a soft prompt trained before, never a file of the user's
(issue 41): anything else at --out is refused before the model loads, and left as it was."""
import os

import numpy as np
import pytest

pytest.importorskip("torch")

from decomp.handlers.soft_prompts import write_soft_prompt  # noqa: E402
from decomp.learning.tuning.api import tune  # noqa: E402
from decomp.learning.tuning.examples import TuneError  # noqa: E402
from decomp.learning.tuning.trainer import TrainOptions  # noqa: E402
from tests.learning.tuning.tuning_helpers import IDENTITY, setup_files  # noqa: E402


class Loaded(Exception):
    """Raised by the test's model loader: the check let the command go on to the model."""


def _load(spec, scoring=False):
    raise Loaded(spec)


def _tune(tmp_path, out):
    program, data = setup_files(tmp_path)
    return tune(program, "capital", data, out, TrainOptions(), load=_load)


@pytest.mark.parametrize("make, words", [
    (lambda path: path.write_text("a,b\n1,2\n"), "not a safetensors file"),
    (lambda path: os.mkfifo(path), "not a plain file"),
    (lambda path: path.symlink_to(path.parent / "nowhere"), "not a plain file"),
])
def test_a_file_that_is_not_a_soft_prompt_is_never_overwritten(tmp_path, make, words):
    out = tmp_path / "data.csv"
    make(out)
    before = out.read_bytes() if out.is_file() else None
    with pytest.raises(TuneError) as caught:
        _tune(tmp_path, out)
    message = str(caught.value)
    assert message.startswith(f"--out {out} holds something other than a soft prompt (") and words in message
    assert message.endswith("nothing is overwritten; give another --out, or move it away")
    assert out.is_symlink() or (out.read_bytes() if out.is_file() else None) == before


def test_a_soft_prompt_trained_before_may_be_replaced(tmp_path):
    out = tmp_path / "capital.safetensors"
    write_soft_prompt(out, np.ones((2, 32), np.float32), {"base_model": IDENTITY[0], "tokenizer": IDENTITY[1]})
    with pytest.raises(Loaded):
        _tune(tmp_path, out)
