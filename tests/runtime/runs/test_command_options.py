"""Each run setting is written once, on `RunOptions`: `decomp run`'s options carry its names and
its defaults, the Python API takes it as keyword arguments, and run.json records it from there
(issue 45: one definition per setting)."""
from __future__ import annotations

import dataclasses

from decomp.runtime.cli import main
from decomp.runtime.runs.api import RunOptions

#: Settings only Python gives: what a run found (`apis`), the temperature and rollout of
#: `decomp optimize`'s rounds, and a metric over the program's `metric` statement (on the
#: command line the statement is the program's own).
PYTHON_ONLY = {"apis", "temperature", "rollout", "metric"}


def run_defaults() -> dict:
    """`decomp run`'s parameters with their defaults (None where there is none)."""
    command = main.get_command(None, "run")
    return command.make_context("run", [], resilient_parsing=True).params


def test_every_setting_is_an_option_of_decomp_run_with_the_same_default():
    params = run_defaults()
    fields = {f.name: f for f in dataclasses.fields(RunOptions)}
    assert set(fields) - PYTHON_ONLY - set(params) == set()
    for name in set(fields) - PYTHON_ONLY:
        default = fields[name].default
        if default is dataclasses.MISSING:  # a factory: an empty collection
            default = fields[name].default_factory()
        given = params[name]
        assert given == default or (not given and not default), (name, given, default)


def test_run_json_records_the_settings_by_their_names():
    recorded = RunOptions(concurrency=3, max_depth=9).to_dict()
    assert recorded["concurrency"] == 3 and recorded["max_depth"] == 9
    assert set(recorded) <= {f.name for f in dataclasses.fields(RunOptions)}
