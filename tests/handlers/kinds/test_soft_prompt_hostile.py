"""Hostile soft prompt files under `decomp check` (issue 41): metadata whose `handler` is a
string or a list, or nested 200,000 deep, is a worded error at the `soft_prompt=` option naming
the field and what was expected, never a traceback, nor "a template ... nested too deeply"."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import save

from decomp.handlers.soft_prompts import FORMAT

META = {"format": FORMAT, "base_model": {"name": "tiny", "hidden_size": 4, "sha256": "a" * 64},
        "tokenizer": {"vocab_size": 10, "sha256": "b" * 64}, "n_tokens": 2}
PROGRAM = ('handler h = prompt(text="", soft_prompt="sp.safetensors")\n'
           "program p(question) {\n    QS: [h] #question\n}\nmain p\n")
DEEP = "[" * 200_000 + "]" * 200_000
CASES = {
    "handler a string": (json.dumps({**META, "handler": "x"}),
                         "its metadata's 'handler' is a string, expected an object (what it was trained for: "
                         "program, name, kind, template_sha256)"),
    "handler a list": (json.dumps({**META, "handler": ["x"]}),
                       "its metadata's 'handler' is a list, expected an object"),
    "handler.kind a number": (json.dumps({**META, "handler": {"kind": 1}}),
                              "its metadata's 'handler.kind' is a number, expected a string"),
    "nested 200,000 deep": (json.dumps(META)[:-1] + f', "training": {DEEP}}}',
                            "the soft prompt's metadata is nested too deeply to read"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_decomp_check_words_a_hostile_soft_prompt_at_its_option(tmp_path, case):
    text, words = CASES[case]
    (tmp_path / "sp.safetensors").write_bytes(save({"soft_prompt": np.ones((2, 4), np.float32)},
                                                   metadata={"decomp": text}))
    (tmp_path / "m.decomp").write_text(PROGRAM)
    proc = subprocess.run([sys.executable, "-m", "decomp", "check", "m.decomp"], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    output = proc.stdout + proc.stderr
    column = PROGRAM.index('"sp.safetensors"') + 1
    assert f"m.decomp:1:{column}: " in output and words in output, output
    assert "template, pattern or expression" not in output
