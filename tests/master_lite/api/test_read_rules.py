"""Every GET of the route table has a read rule (docs/team.md, "Who may read"): its path names
an object the rule checks, or it declares `Operation.reads`. A route added without one fails
here (and shows nothing to a narrowed reader: api/_reads.py answers 403)."""

from __future__ import annotations

from master_lite.api import ROUTES
from master_lite.api._declarations import Listing, Reads
from master_lite.api._reads import path_object


def test_every_get_route_has_a_read_rule() -> None:
    undeclared = [
        route.path
        for route in ROUTES
        if "get" in route.operations
        and route.operations["get"].reads is None
        and path_object(route) is None
    ]
    assert not undeclared, f"GET routes with no read rule (declare Operation.reads): {undeclared}"


def test_only_gets_declare_read_rules() -> None:
    """`reads` says what a GET shows; on another method it would be silently ignored."""
    misplaced = [
        (method, route.path)
        for route in ROUTES
        for method, operation in route.operations.items()
        if method != "get" and operation.reads is not None
    ]
    assert not misplaced, misplaced


def test_listings_name_the_key_of_their_answer() -> None:
    """A Listing's key is a property of the answer's schema (else nothing would be filtered)."""
    for route in ROUTES:
        operation = route.operations.get("get")
        if operation is not None and isinstance(operation.reads, Listing):
            properties = operation.response.get("properties", {})
            assert operation.reads.key in properties, (route.path, operation.reads)
        if operation is not None and operation.reads is Reads.STREAM:
            assert operation.content_type == "text/event-stream", route.path
