"""SnapHeaders (llm/headers.py): remembered strings, forgotten on every change."""

import httpx2
import pytest

from simloop.llm.headers import SnapHeaders

ITEMS = [("Accept", "application/json"), ("Content-Type", "application/json"), ("X-Stainless-Lang", "python")]


def same(ours: SnapHeaders, theirs: httpx2.Headers) -> bool:
    return ours.multi_items() == theirs.multi_items() and ours.raw == theirs.raw


@pytest.mark.parametrize("change", [
    lambda h: h.__setitem__("Accept", "text/plain"),
    lambda h: h.__setitem__("X-New", "1"),
    lambda h: h.__delitem__("content-type"),
    lambda h: h.pop("Accept"),
    lambda h: h.setdefault("X-Other", "2"),
    lambda h: h.update({"Accept": "*/*", "X-More": "3"}),
    lambda h: h.clear(),
    lambda h: setattr(h, "encoding", "utf-8"),
])
def test_every_change_is_seen(change):
    ours, theirs = SnapHeaders(ITEMS), httpx2.Headers(ITEMS)
    assert same(ours, theirs)  # remembered now
    change(ours)
    change(theirs)
    assert same(ours, theirs)


def test_copies_and_plus_are_independent_and_match_httpx2():
    base = SnapHeaders(ITEMS)
    base.multi_items()
    sized = base.plus("Content-Length", "12")
    expected = httpx2.Headers(ITEMS)
    expected["Content-Length"] = "12"
    assert same(sized, expected)
    assert "content-length" not in dict(base.multi_items())  # the template is untouched
    copy = base.copy()
    copy["Accept"] = "text/html"
    assert dict(base.multi_items())["accept"] == "application/json"
    listed = base.multi_items()
    listed.append(("x-mine", "1"))  # a caller's list is its own
    assert ("x-mine", "1") not in base.multi_items()
