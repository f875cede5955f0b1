"""One error root: every exception class of the package is listed here as one a user can see
(a `DecompError`, its builtin base kept as a mixin) or as one decomp keeps to itself, with why.
A new exception class fails `test_every_exception_class_is_decided` until it is listed."""
from __future__ import annotations

import json
import pickle
import subprocess
import sys
from importlib import import_module

import pytest
from jinja2.exceptions import SecurityError

from decomp.dsl.errors import DecompError

#: Every exception class a user can see, by module: each derives from `DecompError`.
USER_FACING = {
    "decomp.dsl.errors": ["DecompError", "InputError", "DecompSyntaxError", "UnclosedError", "CheckError",
                          "CheckWarning", "RunError", "Failure", "HandlerError", "ServiceError",
                          "TransientServiceError", "ModelError", "TransientModelError", "Abort", "BudgetExceeded",
                          "CacheMiss", "DepthExceeded", "InternalError", "Diagnostics"],
    "decomp.dsl.answer_types": ["TypeProblem"],
    "decomp.dsl.operators": ["OperatorError"],
    "decomp.handlers.kinds.python": ["_NotJSON"],
    "decomp.handlers.sandbox.offload": ["TimeLimitError"],
    "decomp.handlers.registry": ["RegistryConflict"],
    "decomp.handlers.search.corpus": ["CorpusError"],
    "decomp.handlers.search.tantivy_index": ["SearchIndexError"],
    "decomp.handlers.soft_prompts": ["SoftPromptError"],
    "decomp.handlers.sandbox.template_limits": ["TemplateLimitError"],
    "decomp.handlers.sandbox.trust": ["PathRefused"],
    "decomp.handlers.sandbox.workers": ["MemoryLimitError"],
    "decomp.runtime.engine.loader": ["PluginNotTrusted"],
    "decomp.runtime.models.openai_backend": ["_BadRequest"],
    "decomp.learning.optimize.folder": ["FolderError"],
    "decomp.learning.optimize.owner_key": ["OwnerKeyError"],
    "decomp.learning.optimize.search": ["OptimizeError"],
    "decomp.runtime.scoring.compare": ["CompareError"],
    "decomp.runtime.storage.layout": ["RunDirError"],
    "decomp.runtime.scoring.metric_calls": ["MetricError"],
    "decomp.runtime.cluster.limits": ["RayError", "WorkerGone", "ActorLost"],
    "decomp.runtime.testing.fake_file": ["FakeFileError", "_Unechoed"],
    "decomp.learning.tuning.examples": ["TuneError"],
}

#: Exception classes that never reach a user as themselves, and why.
INTERNAL = {
    "decomp.handlers.sandbox.workers._NoRoom": "a worker's reply, turned into a MemoryLimitError",
    "decomp.runtime.models.openai_transport.StatusFailure": "a transport's, turned into a ModelError by the backend",
    "decomp.runtime.models.openai_transport.ConnectionFailure": "the same",
    "decomp.runtime.models.openai_transport.MalformedReply": "the same",
    "decomp.runtime.models.openai_transport.ClientFailure": "the same",
    "decomp.runtime.models.openai_transport.InvalidEndpoint": "the same",
    "decomp.runtime.models.openai_backend._WrongApi": "switches the API once, inside the backend",
    "decomp.runtime.models.openai_backend._AttemptExpired": "a deadline inside the backend, said as a ModelError",
    "decomp.runtime.testing.mock_server._ResponderError": "the mock server's, said to its client as an HTTP reply",
    "decomp.runtime.engine.cache.CacheWarning": "a warning (a `warning: ...` line), not an error",
    "decomp.runtime.runs.api.RunInterrupted": "Ctrl-C: a KeyboardInterrupt, as Python's own",
    "decomp.learning.optimize.search.OptimizeInterrupted": "the same",
}

#: The builtin (or library) base each kept as a mixin when it joined `DecompError`: callers that
#: catch them by it go on working. (`PathRefused` was one from the start.)
MIXINS = {
    "decomp.dsl.errors.InputError": ValueError,
    "decomp.dsl.answer_types.TypeProblem": ValueError,
    "decomp.dsl.operators.OperatorError": ValueError,
    "decomp.handlers.registry.RegistryConflict": ValueError,
    "decomp.handlers.search.corpus.CorpusError": ValueError,
    "decomp.handlers.search.tantivy_index.SearchIndexError": ValueError,
    "decomp.handlers.soft_prompts.SoftPromptError": ValueError,
    "decomp.handlers.sandbox.template_limits.TemplateLimitError": SecurityError,
    "decomp.runtime.scoring.compare.CompareError": ValueError,
    "decomp.runtime.scoring.metric_calls.MetricError": ValueError,
    "decomp.runtime.cluster.limits.WorkerGone": RuntimeError,
}

#: Every module of the package imported, in a process of its own (some register plugins as they
#: are imported); each exception class defined there printed with whether it is a DecompError.
_FIND = """
import importlib, inspect, json, pkgutil, warnings
warnings.simplefilter("ignore")
import decomp
from decomp.dsl.errors import DecompError
found = {}
for info in pkgutil.walk_packages(decomp.__path__, "decomp."):
    if info.name.split(".")[1] in ("tests", "benchmarks", "__main__"):
        continue
    module = importlib.import_module(info.name)
    for name, value in vars(module).items():
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == info.name:
            found[f"{info.name}.{name}"] = issubclass(value, DecompError)
print(json.dumps(found))
"""


def _user_facing() -> list[str]:
    return [f"{module}.{name}" for module, names in USER_FACING.items() for name in names]


def _class(path: str) -> type:
    module, _, name = path.rpartition(".")
    return getattr(import_module(module), name)


def test_every_exception_class_is_decided():
    done = subprocess.run([sys.executable, "-c", _FIND], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    undecided = set(found) - set(_user_facing()) - set(INTERNAL)
    assert not undecided, f"decide whether a user can see these (USER_FACING or INTERNAL): {sorted(undecided)}"
    assert not (set(_user_facing()) | set(INTERNAL)) - set(found), "listed here, defined nowhere"
    assert {path for path, decomp in found.items() if decomp} == set(_user_facing())


@pytest.mark.parametrize("path", _user_facing())
def test_a_user_facing_error_is_a_decomp_error(path):
    assert issubclass(_class(path), DecompError)


@pytest.mark.parametrize("path", sorted(INTERNAL))
def test_an_internal_exception_is_none(path):
    assert not issubclass(_class(path), DecompError)


@pytest.mark.parametrize("path, builtin", sorted(MIXINS.items()))
def test_the_builtin_base_stays_a_mixin(path, builtin):
    err = _class(path)("the words")
    assert isinstance(err, builtin) and isinstance(err, DecompError)
    with pytest.raises(builtin):
        raise err


@pytest.mark.parametrize("path", sorted(MIXINS))
def test_a_joined_error_keeps_its_words_and_crosses_processes(path):
    """Made with its message only, as the code raises them; pickled as worker processes and Ray
    send them back, it is the same error, in the same words."""
    err = _class(path)("the words")
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is type(err) and str(again) == str(err) and again.format() == err.format()
    assert "the words" in str(err)


def test_a_template_limit_error_is_worded_as_jinja_and_decomp_read_it():
    from decomp.handlers.sandbox.template_limits import TemplateLimitError

    err = TemplateLimitError("a product of over 10,000 digits")
    assert err.message == str(err) == "a product of over 10,000 digits" and err.args == (err.message,)


def test_worker_gone_names_the_worker_on_both_sides_of_a_pickle():
    from decomp.runtime.cluster.limits import WorkerGone

    again = pickle.loads(pickle.dumps(WorkerGone("worker-3")))
    assert again.holder == "worker-3"
    assert str(again) == "the run took the Ray worker 'worker-3' for dead: it gets no slot or budget"
