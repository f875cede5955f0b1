"""A session's rollout and temperature: at temperature > 0 each rollout draws samples of its
own; at 0 (or at rollout 0) the cache keys are as they always were."""
from __future__ import annotations

from decomp.runtime.engine.session import Session
from decomp.runtime.models.base import Request
from decomp.runtime.runs.api import RunOptions
from decomp.runtime.testing.fake import FakeModel


def test_rollouts_change_keys_only_when_sampling():
    model = FakeModel(default="x")
    hot, cold = Request("Q: a\nA:", temperature=0.7), Request("Q: a\nA:")
    assert Session._sample_key(model, hot, 0, 1) != Session._sample_key(model, hot, 0, 0)
    assert Session._sample_key(model, hot, 0, 1) != Session._sample_key(model, hot, 0, 2)
    assert Session._sample_key(model, hot, 0, 0) == Session._sample_key(model, hot, 0)
    assert Session._sample_key(model, cold, 0, 3) == Session._sample_key(model, cold, 0)


def test_a_sessions_temperature_and_rollout_reach_the_requests(tmp_path):
    seen = []

    def remember(request):
        seen.append(request.temperature)
        return "ok"

    session = Session(model=FakeModel(default=remember), temperature=0.9, rollout=2)
    session.run_sync(session.complete(session.model_override, Request("Q: a\nA:")))
    assert seen == [0.9]


def test_run_json_records_them_only_when_set():
    assert "temperature" not in RunOptions().to_dict() and "rollout" not in RunOptions().to_dict()
    recorded = RunOptions(temperature=1.0, rollout=2).to_dict()
    assert recorded["temperature"] == 1.0 and recorded["rollout"] == 2
    session = RunOptions(temperature=1.0, rollout=2).session()
    assert (session.temperature, session.rollout) == (1.0, 2)
    assert RunOptions.of(session).rollout == 2
