"""The §3.2 path grammar and the browse tree it walks (seeds/004 §3)."""

from __future__ import annotations

import pytest

from broker.gateway.cards import GatewayEntry
from broker.gateway.errors import CatalogError, GatewayError
from broker.gateway.paths import CLUSTER_THRESHOLD, OTHER_CLUSTER, build_tree, parse_path


@pytest.mark.parametrize(
    ("path", "segments"),
    [
        ("/", ()),
        ("/*", ()),
        ("/github", ("github",)),
        ("/github/issues", ("github", "issues")),
        ("/github/issues/*", ("github", "issues")),
        ("/github/issues/create_issue", ("github", "issues", "create_issue")),
        ("/k8s/2fa/0-day", ("k8s", "2fa", "0-day")),  # deeper segments may start with a digit
        ("/" + "a" * 64, ("a" * 64,)),
    ],
)
def test_well_formed_paths(path: str, segments: tuple[str, ...]) -> None:
    assert parse_path(path) == segments


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "not_absolute"),
        ("github", "not_absolute"),
        ("/github/", "trailing_slash"),
        ("//github", "empty_segment"),
        ("/github//issues", "empty_segment"),
        ("/GitHub", "bad_segment"),  # segments are case-sensitive lowercase
        ("/github/Issues", "bad_segment"),
        ("/1password", "bad_segment"),  # a root segment is a namespace: starts with a letter
        ("/-github", "bad_segment"),
        ("/github/_private", "bad_segment"),
        ("/github/iss ues", "bad_segment"),
        ("/github/issues?tag=read", "bad_segment"),
        ("/" + "a" * 65, "bad_segment"),
        ("/*/issues", "star_not_last"),
        ("/github/**", "bad_segment"),
        ("/" + "a/" * 300 + "a", "too_long"),
    ],
)
def test_malformed_paths_are_path_invalid_in_the_error_shape(path: str, reason: str) -> None:
    with pytest.raises(GatewayError) as caught:
        parse_path(path)
    payload = caught.value.payload()
    assert payload["error"] == "PATH_INVALID"
    assert payload["path"] == path
    assert payload["details"] == {"field": "path", "pointer": "/path", "reason": reason}
    assert payload["message"]


def tool(namespace: str, name: str) -> GatewayEntry:
    return GatewayEntry(
        tool_id=f"{namespace}:{name}@1", name=name, namespace=namespace, description=name
    )


def test_a_small_namespace_lists_its_tools_directly() -> None:
    tree = build_tree([tool("ops", f"restart_service_{n}") for n in range(CLUSTER_THRESHOLD)])
    ops = tree.children["ops"]
    assert all(child.tool_id is not None for child in ops.children.values())
    assert len(ops.children) == CLUSTER_THRESHOLD


def test_a_big_namespace_is_split_by_what_its_tools_act_on() -> None:
    names = [
        f"{verb}_{thing}" for verb in ("create", "get", "delete") for thing in ("issue", "label")
    ]
    names += [
        "list_issues",
        "list_labels",
        "search_code",
        "slack_notify",
        "ping",
        "createPullRequest",
        "mergePullRequest",
    ]
    tree = build_tree([tool("github", name) for name in names])
    github = tree.children["github"]
    assert sorted(github.children) == ["issue", "label", OTHER_CLUSTER, "pull_request"]
    assert [
        github.children["issue"].children[leaf].tool_id
        for leaf in sorted(github.children["issue"].children)
    ] == [
        "github:create_issue@1",
        "github:delete_issue@1",
        "github:get_issue@1",
        "github:list_issues@1",
    ]
    # Objects held by one tool go to the shared "other" cluster.
    assert sorted(github.children[OTHER_CLUSTER].children) == [
        "ping",
        "search_code",
        "slack_notify",
    ]
    assert github.children["pull_request"].children["createpullrequest"].path == (
        "/github/pull_request/createpullrequest"
    )


def test_a_namespace_whose_tools_all_act_on_one_thing_is_not_split() -> None:
    tree = build_tree([tool("files", f"op{n}_file") for n in range(CLUSTER_THRESHOLD + 3)])
    assert all(child.tool_id is not None for child in tree.children["files"].children.values())


def test_the_tree_does_not_depend_on_input_order() -> None:
    entries = [
        tool("github", f"{verb}_{thing}")
        for verb in ("a", "b", "c", "d")
        for thing in ("x", "y", "z", "w")
    ]

    def shape(node):  # type: ignore[no-untyped-def]
        return (node.path, node.tool_id, [shape(node.children[k]) for k in sorted(node.children)])

    assert shape(build_tree(entries)) == shape(build_tree(list(reversed(entries))))


def test_leaf_segments_are_lowercase_slugs_and_collisions_get_a_hash_suffix() -> None:
    tree = build_tree(
        [tool("mcp", "Read.File"), tool("mcp", "read-file"), tool("mcp", "_read_file")]
    )
    leaves = tree.children["mcp"].children
    assert {"read-file", "read_file"} <= set(leaves)
    hashed = [segment for segment in leaves if segment not in {"read-file", "read_file"}]
    assert len(hashed) == 1
    assert hashed[0].startswith("read-file-") and len(hashed[0]) == len("read-file-") + 8
    assert leaves["read-file"].tool_id == "mcp:Read.File@1"  # the first by id keeps the plain slug


def test_a_leaf_collision_that_survives_the_hash_is_a_catalog_error() -> None:
    # Identical names cannot both be tools of one namespace unless their ids differ; the hash of
    # the id separates them, so this only triggers on a genuinely duplicated id.
    twin = tool("mcp", "same")
    with pytest.raises(CatalogError, match="share the path segment"):
        build_tree([twin, twin, twin])
