"""URLs the user gives (LLM base URLs, the Sim.API server, a remote assistant) carry no secret.

A key inside a URL would travel wherever the URL does: into ``run.json`` (the config is
recorded as given), into every error message and log line that names the endpoint, and
into httpx's own log lines.  So a URL with a credential is refused where it is validated
(``check_url``: one line naming what it carries, never its value, and where the key
belongs instead), and, as a second line of defence, every URL we print goes through
``redact_urls``.

A credential is user info before the host (``user:PASSWORD@``, or a bare ``TOKEN@``, which
is where some clients put a token) or a query parameter named like a secret (``api-key``,
``key``, ``token``, ``sig`` ... or any name ending in ``_key``, ``_token``, ``_secret``).
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote

__all__ = ["url_credential", "check_url", "redact_urls", "RedactURLs", "TOKEN_ENV_GOES"]

# Where a plugin's token belongs (said when its URL carries one): plugins name the variable.
TOKEN_ENV_GOES = "the variable token_env names"

_SECRET_NAMES = frozenset({"key", "apikey", "api_key", "token", "access_token", "auth", "sig", "signature",
                           "password", "passwd", "secret"})
_SECRET_ENDINGS = ("_key", "apikey", "_token", "_secret", "_password", "_signature")
# User info: everything before the last "@" ahead of the query or fragment.  Wider than the
# RFC's authority on purpose: a password with a raw "/" in it ("u:ab/cd@host") would
# otherwise pass as a host and a path, and then be shown in an error.  The scheme is optional
# so that a URL given without one is checked too (its own error would echo it).
_USERINFO = re.compile(r"^((?:[A-Za-z][A-Za-z0-9+.-]*://)?)([^?#\s]*)@")
# A URL inside a message or log line: from its scheme to the next blank or quote, less the
# punctuation of the sentence around it ("at URL: cannot connect").
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+?(?=[.,:;)\]]*(?:[\s'\"<>`]|$))")
_PARAM_SPLIT = re.compile(r"([&;])")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]{1,32}")  # a parameter name safe to repeat in a message


def _secret_name(name: str) -> bool:
    n = unquote(name).strip().lower().replace("-", "_")
    return n in _SECRET_NAMES or n.endswith(_SECRET_ENDINGS)


def _query(url: str) -> tuple[str, str, str]:
    """(everything up to and including "?", the query, "#fragment"); ("", "", "") without a query."""
    head, mark, rest = url.partition("?")
    if not mark:
        return "", "", ""
    query, hash_, fragment = rest.partition("#")
    return head + mark, query, hash_ + fragment


def url_credential(url: str) -> str | None:
    """What credential ``url`` carries, in words that never repeat its value; None if none."""
    found = _USERINFO.match(url)
    if found:
        return "a password (USER:PASSWORD@)" if ":" in found.group(2) else "user info (USER@, often a token)"
    for part in _PARAM_SPLIT.split(_query(url)[1]):
        name, equals, _ = part.partition("=")
        if equals and _secret_name(name):
            shown = unquote(name).strip()
            return f"the query parameter {shown!r}" if _PLAIN_NAME.fullmatch(shown) else "a secret query parameter"
    return None


def check_url(url: str, key_goes: str, setting: str = "", error: type[Exception] = ValueError) -> str:
    """``url`` as given, or ``error`` (ValueError for validators; prefixed ``setting: `` when
    given) saying what credential it carries and that the key belongs in ``key_goes`` (e.g.
    ``"OPENAI_API_KEY"``); the message never repeats the URL."""
    what = url_credential(url)
    if what is not None:
        where = f"{setting}: " if setting else ""
        raise error(f"{where}the URL carries {what}, which run.json, messages and logs would show: "
                         f"give the URL without it and put the key in {key_goes}")
    return url


def _redact_one(match: re.Match[str]) -> str:
    url = _USERINFO.sub(r"\1***@", match.group(0), count=1)
    head, query, tail = _query(url)
    if not query:
        return url
    parts = _PARAM_SPLIT.split(query)
    masked = [f"{p.partition('=')[0]}=***" if "=" in p and _secret_name(p.partition("=")[0]) else p for p in parts]
    return head + "".join(masked) + tail


def redact_urls(text: str) -> str:
    """``text`` (a URL, a message, a log line) with every URL's user info and secret query
    values masked as ``***``; anything else, ordinary URLs included, unchanged."""
    return _URL_IN_TEXT.sub(_redact_one, text) if "://" in text else text


class RedactURLs(logging.Filter):
    """A handler filter that passes every record through ``redact_urls`` (httpx logs each
    request's full URL at INFO, which ``-v`` shows)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit the format: logging reports that itself, on emit
            return True
        clean = redact_urls(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True
