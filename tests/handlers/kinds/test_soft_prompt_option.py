"""The `soft_prompt=FILE` option of the `prompt` and `score` kinds: its check at load (a soft
prompt file in the program's folders, no endpoint model) at the option's position, the file read
once per handler, the soft prompt handed to the model, and the session refusing it for a model
that cannot read embeddings (every backend but the local one)."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest
from safetensors.numpy import save

import decomp.handlers.kinds.soft_prompt_option as option
from decomp.dsl.errors import DecompError, Diagnostics
from decomp.handlers.soft_prompts import write_soft_prompt
from decomp.runtime.engine.session import Session
from decomp.runtime.models.base import Score
from decomp.runtime.testing.fake import FakeModel

META = {"base_model": {"name": "tiny", "hidden_size": 4, "sha256": "a" * 64},
        "tokenizer": {"vocab_size": 10, "sha256": "b" * 64}}
DECLS = {"prompt": 'prompt(text="", soft_prompt="{file}"{more})',
         "score": 'score(prefix="p: ", soft_prompt="{file}"{more})'}


def soft(path, value=1.0):
    write_soft_prompt(path, np.full((2, 4), value, np.float32), META)
    return path


def source(kind, file="sp.safetensors", more="", head=""):
    decl = DECLS[kind].format(file=file, more=more)
    return f"{head}handler h = {decl}\nprogram p(question) {{\n    QS: [h] #question\n}}\nmain p\n"


def load_errors(path, text, model=None):
    session = Session(model=model or FakeModel())
    with pytest.raises(DecompError) as caught:
        session.load(path, text=text)
    return caught.value.errors if isinstance(caught.value, Diagnostics) else [caught.value]


def at_option(text, err, written):
    """The error sits at the option's value: the line and column of `written` in `text`."""
    line = next(i for i, row in enumerate(text.split("\n"), 1) if written in row)
    column = text.split("\n")[line - 1].index(written) + 1
    return (err.span.line, err.span.column) == (line, column)


KINDS = pytest.mark.parametrize("kind", ["prompt", "score"])


@KINDS
def test_a_missing_soft_prompt_file_is_a_check_error_at_the_option(tmp_path, kind):
    text = source(kind, head="\n")
    (err,) = load_errors(tmp_path / "m.decomp", text)
    assert "cannot read soft prompt file" in err.message and "sp.safetensors" in err.message
    assert at_option(text, err, '"sp.safetensors"'), err.span


@KINDS
def test_while_tuning_a_soft_prompt_not_written_yet_passes_but_others_still_fail(tmp_path, kind):
    """`decomp tune` loads the program whose soft prompt it is about to write: the missing file
    is no error then, a bad file or a path outside the folders still is, and after it is again."""
    with option.pending_soft_prompts():
        Session(model=FakeModel()).load(tmp_path / "m.decomp", text=source(kind))
        (tmp_path / "bad.safetensors").write_text("not one")
        (err,) = load_errors(tmp_path / "m.decomp", source(kind, file="bad.safetensors"))
        assert "not a safetensors file" in err.message
        (tmp_path / "prog").mkdir()
        (err,) = load_errors(tmp_path / "prog" / "m.decomp", source(kind, file="../x.safetensors"))
        assert "outside the program's folder" in err.message
    (err,) = load_errors(tmp_path / "m.decomp", source(kind))
    assert "cannot read soft prompt file" in err.message


@KINDS
def test_a_file_that_is_not_safetensors_is_a_check_error(tmp_path, kind):
    (tmp_path / "sp.safetensors").write_text("not a soft prompt at all", encoding="utf-8")
    text = source(kind)
    (err,) = load_errors(tmp_path / "m.decomp", text)
    assert "is not a safetensors file" in err.message and at_option(text, err, '"sp.safetensors"')


@KINDS
def test_a_file_with_another_tensor_is_a_check_error(tmp_path, kind):
    (tmp_path / "sp.safetensors").write_bytes(save({"weights": np.ones((2, 4), np.float32)}))
    (err,) = load_errors(tmp_path / "m.decomp", source(kind))
    assert "holds tensors ['weights'], not one named 'soft_prompt'" in err.message


@KINDS
def test_a_soft_prompt_outside_the_programs_folders_is_refused_unread(tmp_path, kind):
    (tmp_path / "prog").mkdir()
    (tmp_path / "elsewhere").mkdir()
    soft(tmp_path / "elsewhere" / "sp.safetensors")
    text = source(kind, file="../elsewhere/sp.safetensors")
    (err,) = load_errors(tmp_path / "prog" / "m.decomp", text)
    assert "'../elsewhere/sp.safetensors' is outside the program's folder" in err.message
    assert at_option(text, err, '"../elsewhere/sp.safetensors"')


@KINDS
@pytest.mark.parametrize("head, more", [
    ('model gpt = "openai:gpt-4o-mini"\n', ', model="gpt"'),  # a declared name
    ("", ', model="openai:gpt-4o-mini"'),  # a spec written in place
    ('model default = "openai:gpt-4o-mini"\n', ""),  # the module's default
    ('model default = "fake:answers.json"\n', ""),  # not local: no embeddings either
])
def test_an_endpoint_model_with_a_soft_prompt_is_a_check_error(tmp_path, kind, head, more):
    soft(tmp_path / "sp.safetensors")
    (tmp_path / "answers.json").write_text("{}", encoding="utf-8")
    text = source(kind, more=more, head=head)
    (err,) = load_errors(tmp_path / "m.decomp", text)
    assert "an endpoint model cannot take a soft prompt, only a local: model" in err.message
    assert at_option(text, err, '"sp.safetensors"'), err.span


@KINDS
def test_a_local_model_with_a_soft_prompt_loads(tmp_path, kind):
    soft(tmp_path / "sp.safetensors")
    session = Session(model=FakeModel())
    module = session.load(tmp_path / "m.decomp", text=source(kind, head='model default = "local:gemma-3-270m"\n'))
    assert module.handlers["h"].options.soft_prompt == "sp.safetensors"


@KINDS
def test_check_warns_when_the_soft_prompt_was_trained_for_another_prompt(tmp_path, kind):
    """A template edited after `decomp tune` ran: the soft prompt still serves, `decomp check`
    says it was trained for other text; trained for this very prompt, no warning."""
    from decomp.runtime.engine.checking import check_file

    prompt = "p: " if kind == "score" else ""
    meta = {**META, "handler": {"program": "m.decomp", "name": "h", "kind": kind,
                                "template_sha256": hashlib.sha256(prompt.encode()).hexdigest()}}
    write_soft_prompt(tmp_path / "sp.safetensors", np.ones((2, 4), np.float32), meta)
    (tmp_path / "m.decomp").write_text(source(kind))
    assert check_file(tmp_path / "m.decomp").warnings == []
    edited = source(kind).replace('text=""', 'text="Q: x\\nA: y\\n"').replace('prefix="p: "', 'prefix="q: "')
    (tmp_path / "m.decomp").write_text(edited)
    (warning,) = check_file(tmp_path / "m.decomp").warnings
    assert "trained for another prompt than its own now ([h] of m.decomp" in warning.message
    assert at_option(edited, warning, '"sp.safetensors"')


class Embedding(FakeModel):
    """A fake model that takes soft prompts, and records the ones it got."""

    soft_prompts = True

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.softs = []

    async def complete(self, request):
        self.softs.append(request.soft_prompt)
        return await super().complete(request)

    async def score(self, prompt, continuation, soft_prompt=None):
        self.softs.append(soft_prompt)
        return Score(-1.0, 1)


@KINDS
def test_the_soft_prompt_reaches_the_model_read_once(tmp_path, kind, monkeypatch):
    path = soft(tmp_path / "sp.safetensors")
    reads = []
    real = option.read_soft_prompt
    monkeypatch.setattr(option, "read_soft_prompt", lambda p: reads.append(p) or real(p))
    model = Embedding(default='"x"')
    session = Session(model=model)
    module = session.load(tmp_path / "m.decomp", text=source(kind))
    for question in ("a", "b"):
        assert session.run(module, {"question": question}).error is None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert [s.digest for s in model.softs] == [digest, digest] and len(reads) == 1
    assert model.softs[0].embeddings.shape == (2, 4)


def test_a_handler_without_the_option_sends_none(tmp_path):
    model = Embedding(default='"x"')
    session = Session(model=model)
    module = session.load(tmp_path / "m.decomp", text='handler h = prompt(text="")\nmain h\n')
    assert session.run(module, {"question": "q"}).error is None and model.softs == [None]


@KINDS
def test_the_session_refuses_a_soft_prompt_for_a_model_that_cannot_take_one(tmp_path, kind):
    soft(tmp_path / "sp.safetensors")
    model = FakeModel(default='"x"', name="fake-endpoint")
    session = Session(model=model)
    result = session.run(session.load(tmp_path / "m.decomp", text=source(kind)), {"question": "q"})
    assert result.answer is None
    assert "fake-endpoint cannot take a soft prompt (soft_prompt= needs a local: model)" in result.error
    assert "[h]" in result.error and model.history == []  # refused before any call
