"""``tool_browse`` by query over 1,000 tools: latency per call, index build time, answer size.

The catalog is the tests' generated one (20 namespaces x 50 tools). Each round browses a fixed mix
of queries, from one word to a sentence, once each, timing every call; the report is the p50 and
p99 over all calls, the median build time of the index, and the cl100k_base token count of a
rendered 10-card answer against its bound (32 + 10 x 80, seeds/004 §2.3).

    python bench/bench_gateway_browse.py [--rounds 200] [--builds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from broker.gateway import BrowseMemory, GatewayIndex  # noqa: E402
from broker.gateway.tokens import count_tokens  # noqa: E402
from tests.unit.gateway_vectors.catalog import generated_entries  # noqa: E402

QUERIES = (
    "refund",
    "issue",
    "kubernetes pod",
    "send a slack message to a channel",
    "list every open pull request in the repository",
    "update a customer subscription price",
    "delete permanently",
    "calendar event attendees availability",
    "export analytics report dataset",
    "timeOff request for an employee",
)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--builds", type=int, default=5)
    args = parser.parse_args()

    entries = generated_entries()
    builds = []
    for _ in range(args.builds):
        started = time.perf_counter()
        index = GatewayIndex.build(entries)
        builds.append(time.perf_counter() - started)

    for query in QUERIES:  # warm-up: first-call costs are not steady state
        index.browse(query=query)
    plain: list[float] = []
    stable: list[float] = []
    for _ in range(args.rounds):
        memory = BrowseMemory()
        for query in QUERIES:
            started = time.perf_counter_ns()
            index.browse(query=query, limit=10)
            plain.append((time.perf_counter_ns() - started) / 1e6)
            started = time.perf_counter_ns()
            index.browse(query=query, limit=10, memory=memory)
            stable.append((time.perf_counter_ns() - started) / 1e6)

    answer = index.browse(query="create a new record", limit=10)
    tokens = count_tokens(answer.render())
    bound = 32 + 80 * len(answer.cards)
    print(f"catalog: {len(index)} tools; {args.rounds} rounds x {len(QUERIES)} queries")
    print(f"index build: median {statistics.median(builds) * 1000:.1f} ms over {args.builds}")
    print(
        f"tool_browse(query), limit 10: p50 {percentile(plain, 0.5):.3f} ms, "
        f"p99 {percentile(plain, 0.99):.3f} ms"
    )
    print(
        f"tool_browse(query), cache-stable: p50 {percentile(stable, 0.5):.3f} ms, "
        f"p99 {percentile(stable, 0.99):.3f} ms"
    )
    print(f"rendered 10-card answer: {tokens} tokens (bound {bound})")


if __name__ == "__main__":
    main()
