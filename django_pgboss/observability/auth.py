"""The metrics token: PGBOSS["METRICS_TOKEN"] checked against a request's Authorization header.

The view and the commands' ports both answer ``Authorization: Bearer <token>`` (what Prometheus
sends with ``authorization: {credentials: ...}``), and only through ``bearer_matches()``. The
header is whatever a client sent, so it is read defensively: past ``MAX_HEADER_LENGTH`` it is
refused unread, any text it holds (non-ASCII included) only ever fails to match, and the comparison
takes the same time whatever it holds, since both sides are hashed to one length and compared with
hmac.compare_digest (a plain ``==`` would stop at the first differing character, and compare_digest
of the raw values would still show how long the token is).
"""

from __future__ import annotations

import hashlib
import hmac
import re

#: An Authorization header longer than this is refused without being read (a token is far shorter).
MAX_HEADER_LENGTH = 8192
#: What a token may hold: RFC 6750's b64token (letters, digits, - . _ ~ + / and trailing =),
#: the characters a client can send in a header unchanged.
TOKEN_PATTERN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
#: The shortest token the system check accepts: a short one is guessed.
MIN_TOKEN_LENGTH = 16


def token_problem(token: object) -> str | None:
    """Why ``token`` (a METRICS_TOKEN setting) could never match a header, or None: it must be
    None (no token) or a non-empty str of b64token characters that fits in a header."""
    if token is None:
        return None
    if not isinstance(token, str):
        return f"must be a string or None, not {type(token).__name__}"
    if not token:
        return "must not be empty (None turns the token off)"
    if len(token) > MAX_HEADER_LENGTH - len("Bearer "):
        return f"must be at most {MAX_HEADER_LENGTH - len('Bearer ')} characters long"
    if TOKEN_PATTERN.fullmatch(token) is None:
        return "may hold only letters, digits and - . _ ~ + / (then = signs), as RFC 6750 allows in a header"
    return None


def _digest(value: str) -> bytes:
    # errors="replace": a header decoded as latin-1 (WSGI) always encodes, but a value handed in
    # some other way may hold a lone surrogate; it can only fail to match.
    return hashlib.sha256(value.encode("utf-8", "replace")).digest()


def bearer_matches(header: str | None, token: str | None) -> bool:
    """True when the Authorization ``header`` is ``Bearer <token>`` (scheme in any case, spaces
    around the credentials ignored). False without a token, without a header, or for anything else."""
    if not token or not header or not isinstance(header, str) or len(header) > MAX_HEADER_LENGTH:
        return False
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(_digest(credentials.strip()), _digest(token))
