"""A model proposes a configuration revision (issue 17) through the real OpenAI client, against a local
OpenAI-compatible server on 127.0.0.1: its candidate passes the same checks as any other, its call is kept
in the candidate's manifest, and a protected key or an answer that is no proposal is refused, never a bug."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from robot_harness.config_loop import run_missions
from robot_harness.core.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
RSI = REPO / "scenarios" / "rsi"
sys.path.insert(0, str(REPO / "test"))
from fake_openai import FakeOpenAI  # noqa: E402


@pytest.fixture(scope="module")
def family(tmp_path_factory) -> Path:
    """A journal where two 'storage room' missions were refused under version 1."""
    path = tmp_path_factory.mktemp("llm-proposer") / "journal.sqlite3"
    run_missions(path, [load_scenario(RSI / "train" / "vocab-go.yaml"), load_scenario(RSI / "train" / "vocab-head.yaml")])
    return path


def _propose(journal: Path, base_url: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENAI_BASE_URL": base_url, "ROBOT_HARNESS_MODEL": "proposer-test"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([sys.executable, "-m", "robot_harness", "config", "propose", "--journal", str(journal),
                           "--llm", "--json", *extra], capture_output=True, text=True, timeout=120, env=env)


def _copy(src: Path, dst: Path) -> Path:
    dst.write_bytes(src.read_bytes())
    return dst


def test_the_models_candidate_is_checked_and_kept_with_its_call(family, tmp_path):
    journal = _copy(family, tmp_path / "j.sqlite3")
    answer = {"changes": {"places.office_storage.aliases": ["storage room"]},
              "intended_effect": "goals that say the storage room reach office_storage", "target_measure": "success_rate"}
    with FakeOpenAI([{"content": json.dumps(answer)}]) as fake:
        p = _propose(journal, fake.base_url)
        sent = fake.requests
    assert p.returncode == 0, p.stdout + p.stderr
    [cand] = json.loads(p.stdout)["candidates"]
    assert cand["overrides"] == {"places": {"office_storage": {"aliases": ["storage room"]}}}
    m = cand["manifest"]
    assert m["generator"] == "llm:proposer-test" and len(m["motivating_missions"]) == 2
    call = m["evidence"][0]["llm_call"]
    assert call["model"] == "proposer-test" and call["usage"]["total_tokens"] > 0
    # what the model was shown: the failures (the compiler's refusal), the keys it may and may not change
    shown = json.loads(sent[0]["messages"][1]["content"])
    assert {f["status"] for f in shown["failed_missions"]} == {"BLOCKED"}
    assert "storage room" in json.dumps(shown["failed_missions"])
    assert "navigation.preconditions" in shown["never_change"] and "limits.max_turns" in shown["may_change"]
    h = subprocess.run([sys.executable, "-m", "robot_harness", "config", "history", "--journal", str(journal), "--json"],
                       capture_output=True, text=True, timeout=60)
    assert [v["proposed_by"] for v in json.loads(h.stdout)["versions"]] == ["site", "llm:proposer-test"]


@pytest.mark.parametrize("answer, code, error", [
    ({"changes": {"navigation.preconditions.max_pose_drift_m": 5.0}, "intended_effect": "move even when lost"},
     3, "protected_key"),
    ({"changes": {"interactions": {"approval_policy": {"requires_approval": "owner"}}}}, 3, "protected_key"),
    ({"changes": {"limits.max_turns": 10_000}}, 2, "usage_error"),
    ("I would raise the timeout.", 3, "proposal_unusable"),
    ([1, 2], 3, "proposal_unusable"),
], ids=["protected_dotted", "protected_nested", "out_of_bounds", "prose", "not_an_object"])
def test_a_models_candidate_that_fails_the_checks_is_refused_and_not_kept(family, tmp_path, answer, code, error):
    journal = _copy(family, tmp_path / "j.sqlite3")
    content = answer if isinstance(answer, str) else json.dumps(answer)
    with FakeOpenAI([{"content": content}]) as fake:
        p = _propose(journal, fake.base_url)
    assert p.returncode == code, p.stdout + p.stderr
    assert json.loads(p.stdout)["error"] == error
    h = subprocess.run([sys.executable, "-m", "robot_harness", "config", "history", "--journal", str(journal), "--json"],
                       capture_output=True, text=True, timeout=60)
    assert [v["version"] for v in json.loads(h.stdout)["versions"]] == [1]


def test_no_change_proposed_is_no_candidate_and_an_unreachable_model_exits_4(family, tmp_path):
    journal = _copy(family, tmp_path / "j.sqlite3")
    with FakeOpenAI([{"content": json.dumps({"changes": {}})}]) as fake:
        p = _propose(journal, fake.base_url)
    assert p.returncode == 0 and json.loads(p.stdout)["candidates"] == [], p.stdout + p.stderr
    with FakeOpenAI([{"status": 500}] * 5) as fake:
        p = _propose(journal, fake.base_url)
    assert p.returncode == 4, p.stdout + p.stderr
