"""The metrics endpoints against hostile requests, and where the commands' ports listen.

The view and the ports share one token check (observability/auth.py): a missing, wrong, huge or
non-ASCII Authorization header is refused, the comparison takes the same path whatever it holds,
and a port listens on this machine only unless PGBOSS["METRICS_ADDR"] or --metrics-addr says
otherwise.
"""

from __future__ import annotations

import hashlib
import http.client

import pytest
from django.core import checks
from django.core.management import CommandError

from django_pgboss import boss
from django_pgboss.checks import check_metrics_settings
from django_pgboss.management import metrics_port
from django_pgboss.management.commands.pgboss_work import Command as WorkCommand
from django_pgboss.observability import auth, exposition
from tests.helpers import pgboss_settings_with

pytestmark = pytest.mark.django_db

TOKEN = "k3y-0f-the-metrics_port.ok~+/=="

#: (what, Authorization header or None): each must be refused.
HOSTILE = [
    ("no header", None),
    ("empty", ""),
    ("scheme alone", "Bearer"),
    ("scheme and a space", "Bearer "),
    ("another scheme", f"Basic {TOKEN}"),
    ("one character off", f"Bearer {TOKEN[:-1]}X"),
    ("a prefix of the token", f"Bearer {TOKEN[:-3]}"),
    ("the token and more", f"Bearer {TOKEN}x"),
    ("the token twice", f"Bearer {TOKEN} {TOKEN}"),
    ("very long", "Bearer " + "A" * 100_000),
    ("the token, then far past the limit", f"Bearer {TOKEN}" + "=" * auth.MAX_HEADER_LENGTH),
    ("non-ASCII", "Bearer k3y-0f-thé-metrics_pört.ok~+/=="),
    ("NUL", f"Bearer {TOKEN}\x00"),
]


@pytest.mark.parametrize(("what", "header"), HOSTILE, ids=[what for what, _ in HOSTILE])
def test_a_hostile_header_does_not_match_the_token(what, header):
    assert not auth.bearer_matches(header, TOKEN)


def test_the_token_matches_in_any_scheme_case_and_with_spaces_around_it():
    for header in (f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER   {TOKEN}  ", f" Bearer {TOKEN}"):
        assert auth.bearer_matches(header, TOKEN), header
    # Without a token configured nothing matches, not even an empty credential.
    assert not auth.bearer_matches("Bearer ", None) and not auth.bearer_matches("Bearer ", "")


def test_the_comparison_sees_two_digests_of_one_length_whatever_the_header(monkeypatch):
    """hmac.compare_digest of equal-length digests: its time shows neither where the header
    differs from the token nor how long the token is."""
    seen = []
    real = auth.hmac.compare_digest

    def spy(a, b):
        seen.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    for header in (f"Bearer {TOKEN}", "Bearer x", "Bearer " + "y" * 5000, "Bearer ü"):
        auth.bearer_matches(header, TOKEN)
    assert seen == [(hashlib.sha256().digest_size,) * 2] * 4


def view_status(client, header: str | None) -> int:
    extra = {} if header is None else {"HTTP_AUTHORIZATION": header}
    return client.get("/pgboss/metrics", **extra).status_code


@pytest.mark.parametrize(("what", "header"), HOSTILE, ids=[what for what, _ in HOSTILE])
def test_the_view_refuses_a_hostile_header_with_401(client, what, header):
    boss.create_queue("mail")
    with pgboss_settings_with(METRICS_TOKEN=TOKEN):
        assert view_status(client, header) == 401
        assert view_status(client, f"Bearer {TOKEN}") == 200


def raw_get(port: int, header: bytes | None) -> int:
    """A GET of /metrics with the Authorization header's bytes as given (http.client would encode
    a str header as latin-1 and refuse others)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("GET", "/metrics")
        if header is not None:
            connection.putheader("Authorization", header)
        connection.endheaders()
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_port_with_a_token_answers_only_the_token():
    server = exposition.serve(0, "127.0.0.1", token=TOKEN)
    try:
        port = server.server_port
        for what, header in HOSTILE:
            if header is not None and ("\x00" in header or len(header) > 60_000):
                continue  # http.client refuses to send these; the bytes below do
            assert raw_get(port, None if header is None else header.encode("latin-1", "replace")) == 401, what
        # Bytes no header should hold: UTF-8, a NUL, a line longer than the server reads (431 or
        # 400 from http.server itself, before any WSGI code).
        assert raw_get(port, f"Bearer {TOKEN}".replace("k3y", "kéy").encode()) == 401
        assert raw_get(port, b"Bearer " + b"A" * 70_000) in (400, 401, 431)
        # The port is still up and answers the token.
        assert raw_get(port, f"Bearer {TOKEN}".encode()) == 200
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.django_db(transaction=True)
def test_a_port_without_a_token_answers_anyone_who_reaches_it():
    server = exposition.serve(0, "127.0.0.1")
    try:
        assert raw_get(server.server_port, None) == 200
    finally:
        server.shutdown()
        server.server_close()


def started(*args: str):
    """Start the metrics port as pgboss_work does, with these command-line arguments."""
    parser = WorkCommand().create_parser("manage.py", "pgboss_work")
    options = vars(parser.parse_args(["--metrics-port", "0", *args]))
    metrics_port.check(options)
    return metrics_port.start(options, queues=False)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("args", "setting", "bound"),
    [
        ((), None, "127.0.0.1"),
        ((), "0.0.0.0", "0.0.0.0"),
        (("--metrics-addr", "0.0.0.0"), None, "0.0.0.0"),
        (("--metrics-addr", "127.0.0.1"), "0.0.0.0", "127.0.0.1"),
    ],
)
def test_the_port_listens_on_this_machine_only_unless_told_otherwise(args, setting, bound):
    changes = {} if setting is None else {"METRICS_ADDR": setting}
    with pgboss_settings_with(**changes):
        server = started(*args)
    try:
        assert server.server_address[0] == bound
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.django_db(transaction=True)
def test_the_commands_port_requires_the_configured_token():
    with pgboss_settings_with(METRICS_TOKEN=TOKEN):
        server = started()
    try:
        assert raw_get(server.server_port, None) == 401
        assert raw_get(server.server_port, f"Bearer {TOKEN}".encode()) == 200
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("addr", ["", "  ", "127.0.0.1\x00"])
def test_an_empty_metrics_addr_is_refused_before_anything_starts(addr):
    with pytest.raises(CommandError, match="--metrics-addr must be a host name or an IP address"):
        started("--metrics-addr", addr)


@pytest.mark.parametrize(
    ("token", "problem"),
    [
        (12345678901234567890, "must be a string or None, not int"),
        (b"k3y-0f-the-metrics_port", "must be a string or None, not bytes"),
        ("", "must not be empty"),
        ("k3y 0f the metrics port", "may hold only letters, digits"),
        ("kéy-0f-the-metrics-port", "may hold only letters, digits"),
        ("k3y-0f-the-metrics-port\n", "may hold only letters, digits"),
        ("x" * 9000, "must be at most"),
    ],
)
def test_an_unusable_metrics_token_is_a_check_error(token, problem):
    with pgboss_settings_with(METRICS_TOKEN=token):
        (error,) = check_metrics_settings()
    assert error.id == "pgboss.E007" and error.level == checks.ERROR
    assert problem in error.msg
    assert "k3y" not in error.msg  # the check never prints the token


def test_a_short_metrics_token_is_a_check_warning_and_a_good_one_passes():
    with pgboss_settings_with(METRICS_TOKEN="s3cret"):
        (warning,) = check_metrics_settings()
    assert warning.id == "pgboss.W004" and "s3cret" not in warning.msg
    with pgboss_settings_with(METRICS_TOKEN=TOKEN):
        assert check_metrics_settings() == []
    assert check_metrics_settings() == []  # the defaults: no token, 127.0.0.1


@pytest.mark.parametrize("addr", ["", "   ", None, 8080, "0.0.0.0\x00"])
def test_an_unusable_metrics_addr_is_a_check_error(addr):
    with pgboss_settings_with(METRICS_ADDR=addr):
        (error,) = check_metrics_settings()
    assert error.id == "pgboss.E007" and "METRICS_ADDR" in error.msg
