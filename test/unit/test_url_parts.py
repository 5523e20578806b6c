"""One reader of a journal URL's passwords (``core.journal.UrlParts``) behind every place that must agree
on them: what is printed (``redact_url``), what a node's ROS parameter may carry (``cli.graph_journal``,
the password moved to ``$PGPASSWORD``), what the CLI and the PostgreSQL backend scrub from error text,
and the refusal of an unescaped ``/``."""
from __future__ import annotations

import os

import pytest

from robot_harness import cli
from robot_harness.core.errors import UsageError
from robot_harness.core.journal import UrlParts, check_database_url, redact_url
from robot_harness.core.journal_pg import _url_secrets

CASES = [
    # url, redacted, secrets, (URL for a node's parameter, $PGPASSWORD)
    ("postgresql://harness:s3cr%40t@db.example:5432/fleet",
     "postgresql://harness:***@db.example:5432/fleet", {"s3cr%40t", "s3cr@t"},
     ("postgresql://harness@db.example:5432/fleet", "s3cr@t")),
    ("postgresql://u:se:cr@et@127.0.0.1:5/db?sslpassword=x&PASSWORD=y&host=a",
     "postgresql://u:***@127.0.0.1:5/db?sslpassword=***&PASSWORD=***&host=a", {"se:cr@et", "x", "y"},
     ("postgresql://u@127.0.0.1:5/db?sslpassword=x&host=a", "se:cr@et")),
    ("postgres://h/db?user=a&password=b%21", "postgres://h/db?user=a&password=***", {"b%21", "b!"},
     ("postgres://h/db?user=a", "b!")),
    # no database path: the query still holds the password, and it must not reach the parameter
    ("postgresql://u@h:5432?password=secret&sslmode=disable", "postgresql://u@h:5432?password=***&sslmode=disable",
     {"secret"}, ("postgresql://u@h:5432?sslmode=disable", "secret")),
    ("postgresql://u:@h/db?password=p2", "postgresql://u:***@h/db?password=***", {"p2"}, ("postgresql://u@h/db", "p2")),
    ("postgresql://u@h/db?password&x=1", "postgresql://u@h/db?password&x=1", set(), ("postgresql://u@h/db?x=1", None)),
    ("postgresql://h,h2:5433/db", "postgresql://h,h2:5433/db", set(), ("postgresql://h,h2:5433/db", None)),
]


@pytest.mark.parametrize("url, redacted, secrets, graph", CASES)
def test_every_surface_reads_the_same_passwords_from_a_url(url: str, redacted: str, secrets: set[str],
                                                           graph: tuple[str, str | None], monkeypatch):
    assert redact_url(url) == redacted
    assert UrlParts.of(url).secrets() == secrets
    assert set(_url_secrets(url, None)) == secrets
    for secret in secrets:
        assert secret not in redacted.replace("***", "")
    monkeypatch.delenv("PGPASSWORD", raising=False)
    assert cli.graph_journal(url) == graph[0]
    assert os.environ.get("PGPASSWORD") == graph[1]
    for secret in secrets - {"x"}:  # sslpassword stays in the URL: libpq has no environment variable for it
        assert secret not in graph[0]


def test_the_cli_scrubs_every_spelling_it_was_given(monkeypatch):
    monkeypatch.setattr(cli, "_SECRETS", set())
    cli._remember_secrets("mysql://svc:pa%2Fss%40word@h/db?sslpassword=keyphrase")
    text = "failed: pa%2Fss%40word / pa/ss@word / keyphrase"
    assert cli._scrub(text) == "failed: *** / *** / ***"


@pytest.mark.parametrize("url", ["postgresql://u:pw/1234@h/db", "postgresql://u/x:pw1234@h/db",
                                 "postgresql://u:pw12@y/z@h/db"])
def test_an_unescaped_slash_in_the_user_information_is_refused_and_never_printed(url: str):
    with pytest.raises(UsageError, match="percent-encode") as err:
        check_database_url(url)
    password = UrlParts.of(url).password
    assert password and password not in str(err.value)


def test_a_url_without_user_information_has_no_password_and_keeps_its_location():
    parts = UrlParts.of("postgresql://[::1]:5432/fleet?sslmode=require")
    assert parts.password is None and parts.userinfo == "" and parts.location == "[::1]:5432/fleet"
    assert parts.redacted() == "postgresql://[::1]:5432/fleet?sslmode=require"
