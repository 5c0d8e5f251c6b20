"""The ``tool_browse(path=...)`` grammar and the tree it walks (seeds/004 §3.2, §3.3).

The tree has at most three levels under ``/``: namespaces, then clusters when a namespace is big,
then tool leaves. A namespace of up to :data:`CLUSTER_THRESHOLD` tools lists its tools directly.
A bigger one is split by what its tools act on: a tool's *object* is the words of its name after the
first (the verb), with a leading word equal to the namespace dropped, Snowball-stemmed, so
``create_issue`` and ``list_issues`` share the object ``issue``. A cluster's segment is the
shortest spelling of its object among its tools, the first alphabetically among equals (``issue``,
not ``issues``; ``repository``, not ``repositories``). Objects held by a single
tool go to one :data:`OTHER_CLUSTER`; when that leaves fewer than two clusters the namespace is not
split at all. Everything depends only on the names, so the same catalog always gives the same tree.

A leaf's segment is its tool name lower-cased with every character outside ``[a-z0-9_-]`` made
``-``; when two tools of one node would share a segment, the later by id gets ``-`` and the first
eight hex digits of its id's sha256 instead of its last nine characters.

``*`` is accepted only as the last segment, where it means "this node" (§3.2 reserves it for
filtered listings; in the middle of a path it could only ever mean something else later).
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

from broker.gateway.cards import GatewayEntry
from broker.gateway.errors import CatalogError, GatewayError
from broker.gateway.ranking import stems, words

__all__ = [
    "CLUSTER_THRESHOLD",
    "MAX_PATH_CHARS",
    "OTHER_CLUSTER",
    "PathNode",
    "build_tree",
    "parse_path",
]

CLUSTER_THRESHOLD = 12
OTHER_CLUSTER = "other"
MAX_PATH_CHARS = 512
MAX_SEGMENTS = 3

_SEGMENT = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_ROOT_SEGMENT = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_NOT_SEGMENT_CHAR = re.compile(r"[^a-z0-9_-]")


class PathNode:
    """A node of the browse tree: internal (namespace or cluster, with ``children``) or a leaf
    (one ``tool_id``)."""

    __slots__ = ("children", "path", "segment", "tool_id")

    def __init__(self, path: str, segment: str, tool_id: str | None = None) -> None:
        self.path = path
        self.segment = segment
        self.tool_id = tool_id
        self.children: dict[str, PathNode] = {}

    def tool_ids(self) -> list[str]:
        """Every tool under this node, sorted."""
        if self.tool_id is not None:
            return [self.tool_id]
        return sorted(tool for child in self.children.values() for tool in child.tool_ids())


def parse_path(path: str) -> tuple[str, ...]:
    """The segments of a well-formed path, without a final ``*``.

    Raises:
        GatewayError: ``PATH_INVALID``, naming the rule broken in ``details["reason"]``.
    """
    if len(path) > MAX_PATH_CHARS:
        raise _invalid(path, f"a path is at most {MAX_PATH_CHARS} characters", "too_long")
    if not path.startswith("/"):
        raise _invalid(path, "a path starts with '/'", "not_absolute")
    if path == "/":
        return ()
    if path.endswith("/"):
        raise _invalid(path, "a path other than '/' does not end with '/'", "trailing_slash")
    segments = path[1:].split("/")
    for position, segment in enumerate(segments):
        if segment == "":
            raise _invalid(path, "a path has no empty segments ('//')", "empty_segment")
        if segment == "*":
            if position != len(segments) - 1:
                raise _invalid(path, "'*' is only valid as the last segment", "star_not_last")
            continue
        grammar = _ROOT_SEGMENT if position == 0 else _SEGMENT
        if grammar.fullmatch(segment) is None:
            rule = (
                "a namespace segment matches [a-z][a-z0-9_-]{0,63}"
                if position == 0
                else "a segment matches [a-z0-9][a-z0-9_-]{0,63}"
            )
            raise _invalid(path, f"segment {position + 1} ({segment!r}): {rule}", "bad_segment")
    if segments[-1] == "*":
        segments.pop()
    return tuple(segments)


def build_tree(entries: Sequence[GatewayEntry]) -> PathNode:
    """The browse tree of ``entries`` (ids are unique: the index checked)."""
    root = PathNode("/", "")
    by_namespace: dict[str, list[GatewayEntry]] = defaultdict(list)
    for entry in entries:
        by_namespace[entry.namespace].append(entry)
    for namespace in sorted(by_namespace):
        node = PathNode(f"/{namespace}", namespace)
        root.children[namespace] = node
        members = sorted(by_namespace[namespace], key=lambda entry: entry.tool_id)
        clusters = _clusters(namespace, members)
        if clusters is None:
            _add_leaves(node, members)
            continue
        for segment in sorted(clusters):
            cluster = PathNode(f"{node.path}/{segment}", segment)
            node.children[segment] = cluster
            _add_leaves(cluster, clusters[segment])
    return root


def _clusters(namespace: str, members: list[GatewayEntry]) -> dict[str, list[GatewayEntry]] | None:
    if len(members) <= CLUSTER_THRESHOLD:
        return None
    by_object: dict[str, list[GatewayEntry]] = defaultdict(list)
    spellings: dict[str, set[str]] = defaultdict(set)
    for entry in members:
        key, spelling = _object_of(namespace, entry.name)
        by_object[key].append(entry)
        spellings[key].add(spelling)
    clusters: dict[str, list[GatewayEntry]] = defaultdict(list)
    for key, tools in by_object.items():
        segment = (
            min(spellings[key], key=lambda s: (len(s), s)) if len(tools) > 1 else OTHER_CLUSTER
        )
        clusters[segment].extend(tools)
    if len(clusters) < 2:
        return None
    return {segment: sorted(tools, key=lambda e: e.tool_id) for segment, tools in clusters.items()}


def _object_of(namespace: str, name: str) -> tuple[str, str]:
    """(grouping key, segment spelling) of what the tool named ``name`` acts on."""
    name_words = words(name)
    if len(name_words) > 1 and name_words[0] == namespace:
        name_words = name_words[1:]
    if len(name_words) > 1:
        name_words = name_words[1:]
    spelling = _segment_of("_".join(name_words)) or OTHER_CLUSTER
    return "_".join(stems(name_words)), spelling


def _add_leaves(parent: PathNode, members: Iterable[GatewayEntry]) -> None:
    for entry in members:
        segment = _segment_of(entry.name) or "tool"
        if segment in parent.children:
            digest = hashlib.sha256(entry.tool_id.encode()).hexdigest()[:8]
            segment = f"{segment[:55]}-{digest}"
        if segment in parent.children:
            raise CatalogError(f"two tools under {parent.path} share the path segment {segment!r}")
        parent.children[segment] = PathNode(f"{parent.path}/{segment}", segment, entry.tool_id)


def _segment_of(text: str) -> str:
    slug = _NOT_SEGMENT_CHAR.sub("-", text.lower()).lstrip("_-")
    return slug[:64]


def _invalid(path: str, message: str, reason: str) -> GatewayError:
    return GatewayError(
        "PATH_INVALID",
        message,
        path=path,
        details={"field": "path", "pointer": "/path", "reason": reason},
    )
