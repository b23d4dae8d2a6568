"""Every LLM role, end to end, on a real model (issue 33, DESIGN §7): SmolLM2-135M-Instruct
behind llama-cpp-python's server, started by ``simloop llm-server`` (a real subprocess).

One test, one server: the roles run one after the other through the real CLI, bounded
(one dialogue, a few turns each), as ``scripts/bench --only real-llm`` runs them
(``scripts/real_llm_roles.py`` holds the roles and the checks for both).  What passes:
no dialogue or call ended in an error caused by the protocol; every output the model
botched was retried, repaired, or recorded as an error with its reason; no recorded user
utterance is one the voice's check rejects.  Quality is not judged: a 135M model is weak,
so a dialogue may well end in an error, as long as it says why.

Skips where the extra ``simloop[local-llm]`` is not installed."""

from __future__ import annotations

import pytest

from tests.helpers.cli import bench_script
from tests.helpers.llm_server import llm_server

pytestmark = pytest.mark.slow


# A hang guard above the suite's 900 s: eleven roles on a 135M model, ~5-8 minutes on 2
# cores shared with the rest of the suite.
@pytest.mark.timeout(1800)
def test_every_llm_role_runs_on_the_real_model_without_protocol_errors(tmp_path):
    with llm_server() as srv, bench_script("real_llm_roles") as roles:
        done: dict = {}
        for role in roles.ROLES:
            done[role.name] = roles.run_role(role, srv.url, tmp_path / role.name, done, timeout_s=600)
    report = {name: r.as_dict() for name, r in done.items()}
    assert set(report) == {r.name for r in roles.ROLES}
    for name, r in done.items():
        assert not r.protocol_errors, (name, r.protocol_errors)
        assert not r.unexplained, (name, r.unexplained)
        assert not r.invalid_utterances, (name, r.invalid_utterances)
        assert r.ok, (name, report[name])
        assert r.llm_calls > 0, (name, report[name])  # the role did ask the model
    # The LLM voice spoke in the simulator's and the rehearsal's dialogues; the judge judged.
    assert done["simulator_llm"].dialogues >= 1 and done["rehearse_llm_simulator"].dialogues >= 1
    assert done["eval_judge"].dialogues >= 1
