"""Named session states: where a session is (a fold of its succeeded calls), and the machine's
checks at start (every state known and reachable, every move able to fire, no trap)."""

from __future__ import annotations

from collections.abc import Iterable

from broker.policy.config import StateMachine

__all__ = ["check_machine", "current_state"]


def current_state(machine: StateMachine, succeeded_tools: Iterable[str]) -> str:
    """The state after these succeeded calls, in order (the first move that fits applies)."""
    moves = {(move.from_, move.tool): move.to for move in machine.moves}
    state = machine.initial
    for tool in succeeded_tools:
        state = moves.get((state, tool), state)
    return state


def check_machine(
    machine: StateMachine, where: str, known_tool: set[str] | frozenset[str]
) -> list[tuple[str, str]]:
    """Problems with key paths under ``where`` (``policy.rules[i].states``)."""
    problems: list[tuple[str, str]] = []
    add = problems.append
    states = set(machine.allowed)
    if machine.initial not in states:
        add((f"{where}.initial", f"unknown state {machine.initial!r} (not in allowed)"))
    for state, tools in machine.allowed.items():
        for j, tool in enumerate(tools):
            if tool not in known_tool:
                add((f"{where}.allowed.{state}[{j}]", f"unknown tool {tool!r}"))
    for j, state in enumerate(machine.final):
        if state not in states:
            add((f"{where}.final[{j}]", f"unknown state {state!r}"))
    for j, move in enumerate(machine.moves):
        at = f"{where}.moves[{j}]"
        for end, name in (("from", move.from_), ("to", move.to)):
            if name not in states:
                add((f"{at}.{end}", f"unknown state {name!r}"))
        if move.tool not in known_tool:
            add((f"{at}.tool", f"unknown tool {move.tool!r}"))
        elif move.from_ in states and move.tool not in machine.allowed[move.from_]:
            add((f"{at}.tool", f"{move.tool!r} is not allowed in {move.from_!r}: it never fires"))
    if problems:
        return problems
    graph: dict[str, set[str]] = {state: set() for state in states}
    for move in machine.moves:
        graph[move.from_].add(move.to)
    reachable = _reach(graph, {machine.initial})
    for state in sorted(states - reachable):
        add((f"{where}.allowed.{state}", f"state {state!r} is never reached from the initial one"))
    reverse: dict[str, set[str]] = {state: set() for state in states}
    for source, targets in graph.items():
        for target in targets:
            reverse[target].add(source)
    exits = _reach(reverse, set(machine.final))
    for state in sorted(reachable - exits):
        add((f"{where}.allowed.{state}", f"state {state!r} is a trap: no final state follows it"))
    return problems


def _reach(graph: dict[str, set[str]], start: set[str]) -> set[str]:
    seen = set(start)
    todo = list(start)
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen
