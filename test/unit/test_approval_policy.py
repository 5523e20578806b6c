"""Approval policies: per tag, the mission's owner or only an operator credential answers; the sender of
a mission never approves its own calls under ``operator``; tokens are stored as keyed digests under a
per-install key; the journal records which credential answered; with nobody able to answer the call
waits and the record names the missing setting."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from robot_harness.core.clock import IdGenerator, ManualClock
from robot_harness.core.config import HarnessConfig, InteractionsConfig, load_harness_config
from robot_harness.core.errors import UsageError
from robot_harness.core.interactions import (
    ApprovalPolicy,
    CredentialSet,
    MissionCredentials,
    NotAuthorized,
    TokenHasher,
    TokenKeyError,
    authorize,
    interactions,
    load_token_key,
    request_fields,
    resolve,
    token_key_path,
    token_sha256,
)
from robot_harness.core.journal import MemoryJournal
from robot_harness.core.records import EventDraft, EventType, MissionStatus

from .test_interactions import GO_OFFICE, make, pending

E = EventType
KEY = bytes(range(32))
OPERATOR = "operator-secret"
ALICE = "alice-approver-secret"
OPERATOR_ONLY = {"skill_tags": {"navigate_to": ["requires_operator"]}, "timeout_s": 30.0, "ask_operator": True}


def creds(*, operator: str = OPERATOR, approvers: dict[str, str] | None = None) -> CredentialSet:
    return CredentialSet(TokenHasher(KEY), operator_token=operator, approvers=approvers or {})


def asked(policy: ApprovalPolicy, mission: MissionCredentials, **kw) -> dict:
    """An interaction as the engine would ask it."""
    from robot_harness.core.interactions import Interaction

    return Interaction(interaction_id="ask-1", mission_id="m-1", kind="approval", prompt="go?",
                       **request_fields(policy, mission, **kw))


# ----------------------------------------------------------------------------- the rule, in the core


def test_the_owner_policy_accepts_the_owner_token_and_nothing_else():
    i = asked(ApprovalPolicy.OWNER, creds().for_mission("evil"))
    assert authorize(i, "evil", TokenHasher(KEY)) == "owner"
    with pytest.raises(NotAuthorized, match="not mission m-1's owner token"):
        authorize(i, OPERATOR, TokenHasher(KEY))


def test_under_operator_the_senders_own_token_is_refused_and_the_operator_token_approves():
    # the attack of issue 13: send with --owner-token evil, answer with --token evil
    i = asked(ApprovalPolicy.OPERATOR, creds().for_mission("evil"))
    with pytest.raises(NotAuthorized, match="sent with"):
        authorize(i, "evil", TokenHasher(KEY))
    assert authorize(i, OPERATOR, TokenHasher(KEY)) == "operator"
    assert i.waiting_on == ""


def test_under_operator_a_sender_holding_the_operator_token_cannot_use_it_on_its_own_mission():
    only_operator = asked(ApprovalPolicy.OPERATOR, creds().for_mission(OPERATOR))
    with pytest.raises(NotAuthorized, match="sent with"):
        authorize(only_operator, OPERATOR, TokenHasher(KEY))
    assert "sender presented" in only_operator.waiting_on and "interactions.approvers" in only_operator.waiting_on
    # another approver still can; the record names which one
    with_alice = asked(ApprovalPolicy.OPERATOR, creds(approvers={"alice": ALICE}).for_mission(OPERATOR))
    assert with_alice.waiting_on == ""
    with pytest.raises(NotAuthorized, match="sent with"):
        authorize(with_alice, OPERATOR, TokenHasher(KEY))
    assert authorize(with_alice, ALICE, TokenHasher(KEY)) == "approver:alice"


def test_a_mission_sent_without_a_token_is_owned_by_the_operator_and_under_operator_the_operator_approves():
    c = creds().for_mission("")
    assert c.sender_hmac == "" and c.owner_hmac == TokenHasher(KEY).digest(OPERATOR)
    for policy in ApprovalPolicy:
        assert authorize(asked(policy, c), OPERATOR, TokenHasher(KEY)) in {"owner", "operator"}
    with pytest.raises(NotAuthorized):
        authorize(asked(ApprovalPolicy.OPERATOR, c), "", TokenHasher(KEY))


def test_a_program_session_is_owned_by_the_operator_and_its_bearer_token_never_approves():
    # an MCP client whose bearer token is also the operator token (one secret reused): under operator, refused
    shared = asked(ApprovalPolicy.OPERATOR, creds(approvers={"alice": ALICE}).for_program(OPERATOR))
    with pytest.raises(NotAuthorized, match="sent with"):
        authorize(shared, OPERATOR, TokenHasher(KEY))
    assert authorize(shared, ALICE, TokenHasher(KEY)) == "approver:alice"
    distinct = asked(ApprovalPolicy.OPERATOR, creds().for_program("mcp-bearer"))
    with pytest.raises(NotAuthorized, match="sent with"):
        authorize(distinct, "mcp-bearer", TokenHasher(KEY))
    assert authorize(distinct, OPERATOR, TokenHasher(KEY)) == "operator"
    # under owner, as before: the operator token owns a program's session
    assert authorize(asked(ApprovalPolicy.OWNER, creds().for_program("mcp-bearer")), OPERATOR,
                     TokenHasher(KEY)) == "owner"


def test_with_no_operator_configured_the_record_names_the_missing_variable():
    c = CredentialSet(TokenHasher(KEY), operator_token="", operator_token_env="SITE_OPERATOR_TOKEN",
                      approvers={"bob": ""}, unset=["SITE_APPROVER_BOB"]).for_mission("evil")
    i = asked(ApprovalPolicy.OPERATOR, c)
    assert "$SITE_OPERATOR_TOKEN" in i.waiting_on and "$SITE_APPROVER_BOB" in i.waiting_on
    with pytest.raises(NotAuthorized, match=r"nobody can answer ask-1 yet.*\$SITE_OPERATOR_TOKEN"):
        authorize(i, "anything", TokenHasher(KEY))
    with pytest.raises(NotAuthorized, match="sent with"):
        authorize(i, "evil", TokenHasher(KEY))
    # the owner policy needs no operator here: the owner answers
    assert asked(ApprovalPolicy.OWNER, c).waiting_on == ""


def test_digests_are_keyed_a_resolver_without_the_key_or_with_another_is_told_so():
    c = creds().for_mission("evil")
    assert c.owner_hmac != token_sha256("evil") and c.owner_hmac == TokenHasher(KEY).digest("evil")
    assert TokenHasher(bytes(32)).digest("evil") != c.owner_hmac, "another install, another digest"
    i = asked(ApprovalPolicy.OWNER, c)
    with pytest.raises(NotAuthorized, match="no token key"):
        authorize(i, "evil", None)
    with pytest.raises(NotAuthorized, match="another token key"):
        authorize(i, "evil", TokenHasher(bytes(32)))
    assert "evil" not in repr(TokenHasher(KEY)) and KEY.hex() not in repr(TokenHasher(KEY))


def test_a_record_from_before_keyed_digests_still_resolves_under_the_owner_rule():
    from robot_harness.core.interactions import Interaction

    old = Interaction(interaction_id="ask-1", mission_id="m-1", kind="approval", prompt="go?",
                      owner_sha256=token_sha256("s3cret"))
    assert old.policy is ApprovalPolicy.OWNER
    assert authorize(old, "s3cret", None) == "owner" == authorize(old, "s3cret", TokenHasher(KEY))
    with pytest.raises(NotAuthorized):
        authorize(old, "guess", TokenHasher(KEY))


def test_the_view_shows_policy_and_approver_names_but_no_digest():
    i = asked(ApprovalPolicy.OPERATOR, creds(approvers={"alice": ALICE}).for_mission("evil"))
    view = i.view()
    assert view["policy"] == "operator" and view["approvers"] == ["operator", "approver:alice"]
    text = repr(view)
    for digest in (i.owner_hmac, i.sender_hmac, *(a.hmac for a in i.approvers)):
        assert digest not in text
    assert "owner_hmac" not in view and "sender_hmac" not in view and "key_id" not in view


# ----------------------------------------------------------------------------- configuration


def test_policies_per_tag_with_operator_winning_and_unknown_names_refused_clearly():
    cfg = InteractionsConfig(approval_policy={"requires_approval": "owner", "site_critical": "operator"})
    assert cfg.approval_policy_for({"requires_approval"}) == "owner"
    assert cfg.approval_policy_for({"requires_approval", "site_critical"}) == "operator"
    assert cfg.approval_policy_for({"physical"}) is None
    assert InteractionsConfig().approval_policy_for({"requires_operator"}) == "operator", "a shipped tag"
    assert InteractionsConfig(approval_tags=["legacy"]).approval_policy_for({"legacy"}) == "owner"
    with pytest.raises(UsageError, match=r"approval_policy\.requires_approval: unknown policy 'admin'.*'owner'.*'operator'"):
        load_harness_config(overrides={"interactions": {"approval_policy": {"requires_approval": "admin"}}})
    with pytest.raises(UsageError, match="not an environment variable name"):
        load_harness_config(overrides={"interactions": {"approvers": {"alice": "not a var"}}})
    with pytest.raises(UsageError, match="approver name"):
        load_harness_config(overrides={"interactions": {"approvers": {"a b": "OK_VAR"}}})


def test_credentials_come_from_the_named_environment_variables():
    cfg = InteractionsConfig(operator_token_env="SITE_OP", approvers={"alice": "SITE_ALICE", "bob": "SITE_BOB"})
    c = CredentialSet.from_environment(cfg, {"SITE_OP": OPERATOR, "SITE_ALICE": ALICE}, TokenHasher(KEY))
    assert [a.name for a in c.approvers] == ["operator", "approver:alice"]
    assert c.is_operator(OPERATOR) and not c.is_operator(ALICE) and not c.is_operator("")
    none = CredentialSet.from_environment(cfg, {}, TokenHasher(KEY))
    assert not none.operator_configured and "$SITE_OP" in none.missing and "$SITE_BOB" in none.missing


# ----------------------------------------------------------------------------- the key file


def test_the_key_is_created_once_private_and_read_back(tmp_path: Path):
    journal = tmp_path / "journal.sqlite3"
    path = token_key_path(journal)
    assert path == tmp_path / "journal.sqlite3.token_key"
    with pytest.raises(TokenKeyError, match="no token key"):
        load_token_key(path, create=False)
    key = load_token_key(path, create=True)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(key) == 32
    assert load_token_key(path, create=True) == key == load_token_key(path, create=False), "never replaced"
    assert [p.name for p in tmp_path.iterdir()] == [path.name], "no temporary file left"
    os.chmod(path, 0o644)
    with pytest.raises(TokenKeyError, match="readable by others.*chmod 600"):
        load_token_key(path, create=False)
    os.chmod(path, 0o600)
    path.write_text("not hex\n")
    with pytest.raises(TokenKeyError, match="does not hold a token key"):
        load_token_key(path, create=False)


def test_a_place_the_key_cannot_be_written_is_a_clear_error(tmp_path: Path):
    with pytest.raises(TokenKeyError, match=r"cannot create the token key .*missing.*errno 2"):
        load_token_key(tmp_path / "missing" / "j.sqlite3.token_key", create=True)


# ----------------------------------------------------------------------------- in the closed loop


def _mission(policy_tags, *, operator_cb, sender: str, credential_set: CredentialSet | None = None, **cfg):
    runner, robot, journal, clock = make([GO_OFFICE, {"done": "arrived"}], operator=operator_cb,
                                         interactions={**OPERATOR_ONLY, "skill_tags": {"navigate_to": policy_tags},
                                                       **cfg})
    mission = (credential_set or creds()).for_mission(sender)
    out = runner.run("go to the office", owner="a-script", credentials=mission)
    return out, robot, journal


def test_under_operator_the_sender_is_refused_the_operator_approves_and_the_journal_says_with_what():
    refused = []

    def operator(runner, journal, clock):
        for i in pending(journal):
            with pytest.raises(NotAuthorized, match="sent with") as exc:
                resolve(journal, interaction_id=i.interaction_id, resolution="approve", token="evil", clock=clock,
                        operator="mallory", hasher=TokenHasher(KEY))
            refused.append(exc.value.message)
            resolve(journal, interaction_id=i.interaction_id, resolution="approve", token=OPERATOR, clock=clock,
                    operator="olga", hasher=TokenHasher(KEY))

    out, robot, journal = _mission(["requires_operator"], operator_cb=operator, sender="evil")
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    assert refused and len(robot.goals) == 1
    (asked_ev,) = journal.events(types=[E.INTERACTION_REQUESTED])
    assert asked_ev.payload["policy"] == "operator" and asked_ev.payload["waiting_on"] == ""
    assert [a["name"] for a in asked_ev.payload["approvers"]] == ["operator"]
    (resolved_ev,) = journal.events(types=[E.INTERACTION_RESOLVED])
    assert resolved_ev.payload["answered_as"] == "operator" and resolved_ev.payload["operator"] == "olga"
    (i,) = interactions(journal.events()).values()
    assert i.view()["resolution"]["answered_as"] == "operator"
    # nothing in the journal is a token, or an unkeyed digest of one
    text = repr([e.payload for e in journal.events()])
    for secret in ("evil", OPERATOR, token_sha256("evil"), token_sha256(OPERATOR)):
        assert secret not in text


def test_under_owner_the_sender_still_approves_its_own_mission():
    def operator(runner, journal, clock):
        for i in pending(journal):
            resolve(journal, interaction_id=i.interaction_id, resolution="approve", token="alice-owner", clock=clock,
                    operator="alice", hasher=TokenHasher(KEY))

    out, robot, journal = _mission(["requires_approval"], operator_cb=operator, sender="alice-owner")
    assert out.status is MissionStatus.SUCCEEDED, out.summary
    (resolved_ev,) = journal.events(types=[E.INTERACTION_RESOLVED])
    assert resolved_ev.payload["answered_as"] == "owner"


def test_with_no_operator_the_call_waits_until_expiry_and_the_result_names_the_setting():
    tried = []

    def operator(runner, journal, clock):
        for i in pending(journal):
            assert "$ROBOT_HARNESS_OPERATOR_TOKEN" in i.waiting_on
            if not tried:
                with pytest.raises(NotAuthorized, match="ROBOT_HARNESS_OPERATOR_TOKEN"):
                    resolve(journal, interaction_id=i.interaction_id, resolution="approve", token="whatever",
                            clock=clock, hasher=TokenHasher(KEY))
                tried.append(True)

    out, robot, journal = _mission(["requires_operator"], operator_cb=operator, sender="evil",
                                   credential_set=creds(operator=""), timeout_s=2.0)
    assert tried and robot.goals == []
    (i,) = interactions(journal.events()).values()
    assert i.resolution["resolution"] == "expired" and i.resolution["answered_as"] == "harness"
    (res,) = [e.payload for e in journal.events(types=[E.TOOL_RESULT_RECORDED])]
    assert res["status"] == "cancelled" and "$ROBOT_HARNESS_OPERATOR_TOKEN" in res["content"]["reason"]
    assert res["content"]["policy"] == "operator"


def test_a_question_follows_the_ask_operator_skills_tags():
    ask = {"tool_calls": [{"name": "ask_operator", "arguments": {"question": "Which door?"}}]}
    runner, robot, journal, clock = make([ask], interactions={
        **OPERATOR_ONLY, "timeout_s": 1.0, "skill_tags": {"ask_operator": ["requires_operator"]}})
    runner.run("find the door", owner="a-script", credentials=creds().for_mission("evil"))
    (asked_ev,) = journal.events(types=[E.INTERACTION_REQUESTED])
    assert asked_ev.payload["policy"] == "operator"


def test_the_mission_record_carries_keyed_digests_only():
    j = MemoryJournal(clock=ManualClock(), ids=IdGenerator(seed=3))
    runner, robot, journal, clock = make([{"done": "nothing to do"}], journal=j)
    runner.run("go to the office", owner="a-script", credentials=creds().for_mission("evil"))
    (started,) = journal.events(types=[E.MISSION_STARTED])
    assert started.payload["owner_hmac"] == TokenHasher(KEY).digest("evil")
    assert started.payload["sender_hmac"] == started.payload["owner_hmac"]
    assert "owner_sha256" not in started.payload


def test_harness_resolutions_written_elsewhere_are_credited_to_the_harness():
    from robot_harness.core.interactions import Resolution, resolution_draft

    j = MemoryJournal(clock=ManualClock(), ids=IdGenerator(seed=4))
    j.setup()
    j.append([EventDraft(type=E.MISSION_STARTED, mission_id="m-1"),
              EventDraft(type=E.INTERACTION_REQUESTED, mission_id="m-1", payload={
                  "interaction_id": "ask-1", "kind": "approval", "prompt": "go?"})])
    (i,) = interactions(j.events()).values()
    draft = resolution_draft(i, Resolution.DISMISS, operator="harness", now=1.0)
    assert draft.payload["answered_as"] == "harness"
    assert HarnessConfig().interactions.approval_policy == {"requires_approval": "owner",
                                                            "requires_operator": "operator"}


def test_a_journaled_configuration_with_redacted_values_loads_again_for_replay():
    runner, robot, journal, clock = make([{"done": "nothing to do"}], interactions={
        **OPERATOR_ONLY, "approvers": {"token_bot": "SITE_BOT_VAR"}})
    runner.run("go to the office", owner="a-script", credentials=creds().for_mission("evil"))
    (started,) = journal.events(types=[E.MISSION_STARTED])
    recorded = started.payload["config"]["interactions"]
    assert recorded["approvers"] == {"token_bot": "***"} and recorded["operator_token_env"] == "***"
    again = load_harness_config(overrides=started.payload["config"])
    assert again.interactions.approval_policy_for({"requires_operator"}) == "operator"
