"""Tests of Python responders, `fake:module:function` (decomp.runtime.testing.fake.responder_model):
where the function may come from, what a call gets and returns, errors, and cache identity."""
from __future__ import annotations

import asyncio
import itertools
import json
import textwrap

import pytest

from decomp.runtime.models.base import ModelError, ModelSettings, Request
from decomp.runtime.runs.api import run_dataset
from decomp.runtime.testing.fake import FOLDER_OPTION, RESPONDER, fake_model, responder_model
from decomp.handlers.sandbox.trust import Trust

_names = itertools.count()

LETTERS = '''
import re

def reply(request):
    """Decompose a letter_cat question; fail for "Bad Name"."""
    prompt = request.prompt
    question = prompt[prompt.rfind("QC:") + 3:].split("\\n", 1)[0].strip()
    if "Bad Name" in question:
        raise ValueError("no steps for this one")
    found = re.search(r'position (\\d+) of the words in "([^"]*)".* using an? ([a-z-]+)', question)
    pos, words, delim = found.groups()
    done = len(re.findall(r"(?m)^QS:.*\\S", prompt[prompt.rfind("QC:"):]))
    steps = [f'[split] What are the words in "{words}"?',
             f'(foreach) [str_position] What is the letter at position {pos} of "#1"?',
             f"[merge] Concatenate #2 using a {delim}.", "[EOQ]"]
    return " " + steps[done]
'''


def module(folder, source: str) -> str:
    """Write `source` as a module of its own name in `folder`; its name."""
    name = f"responders_{next(_names)}"
    (folder / f"{name}.py").write_text(textwrap.dedent(source))
    return name


def ask(model, prompt: str) -> str:
    return asyncio.run(model.complete(Request(prompt))).text


def test_the_spec_form():
    assert RESPONDER.fullmatch("pkg.sub:fn") and RESPONDER.fullmatch("_m:_f")
    assert not RESPONDER.fullmatch("answers.json") and not RESPONDER.fullmatch("dir/m:f")
    assert not RESPONDER.fullmatch("m:f.json") and not RESPONDER.fullmatch("1m:f")


def test_a_responder_of_the_working_folder_answers_every_request(tmp_path, monkeypatch):
    name = module(tmp_path, "def reply(request):\n    return request.prompt.upper()\n")
    monkeypatch.chdir(tmp_path)
    model = fake_model(f"{name}:reply")
    assert model.name == f"fake:{name}:reply"
    assert ask(model, "Q: hi\nA:") == "Q: HI\nA:"
    assert [r.prompt for r in model.history] == ["Q: hi\nA:"]


def test_a_declared_responder_is_looked_for_in_the_recorded_folder(tmp_path):
    name = module(tmp_path, "def reply(request):\n    return 'from the program folder'\n")
    settings = ModelSettings(options=((FOLDER_OPTION, str(tmp_path)),))
    assert ask(fake_model(f"{name}:reply", settings), "Q: x\nA:") == "from the program folder"


def test_modules_outside_the_folder_need_trust(tmp_path):
    with pytest.raises(ModelError, match="not allowed.*--trust json"):
        responder_model("json:dumps", tmp_path)
    assert responder_model("textwrap:dedent", tmp_path, trust=Trust.of(["textwrap"])).name == "fake:textwrap:dedent"
    settings = ModelSettings(options=((FOLDER_OPTION, str(tmp_path)),), trust=Trust.of(["textwrap"]))
    assert fake_model("textwrap:dedent", settings).name == "fake:textwrap:dedent"  # the session's trust
    with pytest.raises(ModelError, match="not allowed"):
        responder_model("textwrap:dedent", tmp_path)
    with pytest.raises(ModelError, match="may not be called"):
        responder_model("os:getcwd", tmp_path)


def test_missing_modules_and_functions(tmp_path):
    with pytest.raises(ModelError, match="no module named 'nowhere_at_all'"):
        responder_model("nowhere_at_all:f", tmp_path)
    name = module(tmp_path, "VALUE = 1\n")
    with pytest.raises(ModelError, match="cannot load"):
        responder_model(f"{name}:missing", tmp_path)


def test_a_responder_that_raises_or_returns_no_string_fails_that_call(tmp_path):
    name = module(tmp_path, """
        def boom(request):
            raise KeyError("oops")

        def number(request):
            return 3
    """)
    with pytest.raises(ModelError, match="raised KeyError: 'oops'"):
        ask(responder_model(f"{name}:boom", tmp_path), "Q: x\nA:")
    with pytest.raises(ModelError, match="returned int, not a string"):
        ask(responder_model(f"{name}:number", tmp_path), "Q: x\nA:")


def test_the_cache_identity_follows_the_functions_code(tmp_path):
    name = module(tmp_path, "def reply(request):\n    return 'one'\n")
    first = responder_model(f"{name}:reply", tmp_path).cache_identity()
    assert first == responder_model(f"{name}:reply", tmp_path).cache_identity()
    other = module(tmp_path, "def reply(request):\n    return 'two'\n")
    edited = responder_model(f"{other}:reply", tmp_path).cache_identity()
    assert edited.split("#", 1)[1] != first.split("#", 1)[1]


def test_a_dataset_run_with_a_responder_records_the_failing_row_and_goes_on(tmp_path, monkeypatch):
    name = module(tmp_path, LETTERS)
    monkeypatch.chdir(tmp_path)
    rows = [{"id": "a", "question": 'Take the letters at position 1 of the words in "Ada King" and '
                                    'concatenate them using a space.', "answer": "A K"},
            {"id": "b", "question": 'Take the letters at position 1 of the words in "Bad Name" and '
                                    'concatenate them using a space.', "answer": "B N"},
            {"id": "c", "question": 'Take the letters at position 2 of the words in "Alan Turing" and '
                                    'concatenate them using a comma.', "answer": "l,u"}]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = run_dataset("decomp/letter_cat", data, model=f"fake:{name}:reply", run_dir=tmp_path / "run")
    records = {r["id"]: r for r in done.records()}
    assert (done.rows, done.failed) == (3, 1)
    assert records["a"]["answer"] == "A K" and records["c"]["answer"] == "l,u"
    assert "no steps for this one" in records["b"]["error"]
