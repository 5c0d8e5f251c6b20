"""The deploy/ artefacts, checked without a container engine.

promtool checks the alert rules, runs their unit tests and checks the Prometheus config; every
PromQL expression (alerts and dashboard) may name only metrics and labels a freshly built broker
exposes; compose, the k8s manifests and the Dockerfile must agree with each other and with the
broker (config path, port, probes, user, secrets), and the shipped config must be a real one.

promtool comes from ``PROMTOOL`` or ``PATH`` (``scripts/with-promtool`` provides it); without
one these tests fail when ``CI`` is set and skip otherwise.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from litestar.testing import TestClient
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from broker.app import create_app
from broker.config import BrokerConfig, load_config, parse_config
from broker.tools.runtime import build_registry
from tests.conftest import DEMO_CONFIG, ROOT, with_private_ledger

DEPLOY = ROOT / "deploy"
PROMETHEUS = DEPLOY / "prometheus"
ALERTS = PROMETHEUS / "alerts.yml"
ALERTS_TEST = PROMETHEUS / "alerts_test.yml"
PROMETHEUS_CONFIG = PROMETHEUS / "prometheus.yml"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "broker.json"
DATASOURCES = DEPLOY / "grafana" / "provisioning" / "datasources"
DASHBOARD_PROVIDERS = DEPLOY / "grafana" / "provisioning" / "dashboards"
COMPOSE = DEPLOY / "compose.yaml"
K8S = DEPLOY / "k8s"
DOCKERFILE = DEPLOY / "Dockerfile"
BROKER_TOML = DEPLOY / "broker.toml"

SECRETS = {"BROKER_TOKEN_SIGNING_KEY": "deploy-test-signing-key-0123456789abcdef"}

# Labels Prometheus attaches to every scraped series.
TARGET_LABELS = frozenset({"job", "instance"})

# Grafana's variables, replaced by something PromQL accepts before promtool parses the queries.
GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
    "$instance": ".*",
}

REQUIRED_ALERTS = {
    "BrokerImpliedWriteViolation",
    "BrokerPassRateDrop",
    "BrokerDecisionLatencyP95High",
    "BrokerExecutionLatencyP95High",
    "BrokerStoreUnavailable",
    "BrokerLedgerUnavailable",
    "BrokerProviderErrorRatioHigh",
    "BrokerOutcomeUnknownKeys",
    "BrokerIdempotencyReplaysSpiking",
    "BrokerLedgerErrors",
    "BrokerLedgerSignatureTailGrowing",
    "BrokerApprovalsWaiting",
}
DEPLOY_README = DEPLOY / "README.md"

K8S_KINDS = {
    "deployment.yaml": ("apps/v1", "Deployment"),
    "service.yaml": ("v1", "Service"),
    "configmap.yaml": ("v1", "ConfigMap"),
    "secret.yaml": ("v1", "Secret"),
    "hpa.yaml": ("autoscaling/v2", "HorizontalPodAutoscaler"),
    "pdb.yaml": ("policy/v1", "PodDisruptionBudget"),
}


# -- helpers ------------------------------------------------------------------------------------


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def load_docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def only(path: Path) -> dict[str, Any]:
    docs = load_docs(path)
    assert len(docs) == 1, f"{path.name}: expected one document, found {len(docs)}"
    return docs[0]


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(ALERTS)["groups"] for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def dashboard_panels() -> Iterator[dict[str, Any]]:
    for panel in dashboard()["panels"]:
        yield panel
        yield from panel.get("panels", [])  # panels inside collapsed rows


def dashboard_queries() -> list[tuple[str, str]]:
    """``(where, PromQL)`` for every panel target and query variable of the dashboard."""
    found = [
        (f"panel {panel['title']!r} target {target['refId']}", target["expr"])
        for panel in dashboard_panels()
        for target in panel.get("targets", [])
    ]
    for variable in dashboard().get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if variable.get("type") == "query" and query:
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", query, re.DOTALL)
            found.append((f"variable {variable['name']!r}", inner.group(1) if inner else query))
    return found


def provisioned_datasource() -> dict[str, Any]:
    files = sorted(DATASOURCES.glob("*.y*ml"))
    assert files, "no datasource provisioning file"
    sources = [source for path in files for source in load_yaml(path)["datasources"]]
    assert len(sources) == 1, "the dashboard expects exactly one provisioned datasource"
    source: dict[str, Any] = sources[0]
    return source


def grafana_substituted(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unknown Grafana variable in {expr!r}"
    return expr


def without_strings(expr: str) -> str:
    """The expression with the insides of its string literals blanked (label values)."""
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)


def closing_paren(text: str, start: int) -> int:
    """Index of the parenthesis closing the one at ``text[start]``."""
    depth = 0
    for index in range(start, len(text)):
        if text[index] == "(":
            depth += 1
        elif text[index] == ")":
            depth -= 1
            if depth == 0:
                return index
    raise AssertionError(f"unbalanced parentheses in {text!r}")


def label_list(text: str) -> set[str]:
    return {label.strip() for label in text.split(",") if label.strip()}


def promql_problems(expr: str, series: dict[str, frozenset[str]]) -> list[str]:
    """Metric and label names in ``expr`` that a broker does not expose.

    Names: every ``broker_*`` identifier must be a series of the registry (``_total`` of a
    counter, ``_bucket``/``_count``/``_sum`` of a histogram, a gauge's name). Labels: matchers
    must name labels of their metric; ``by``/``without`` labels must exist on every broker
    series inside the aggregation; ``on``/``ignoring``/``group_*`` labels on some series of the
    expression. ``job`` and ``instance`` (added by the scrape) are always allowed.
    """
    problems: list[str] = []
    text = without_strings(expr)
    names = re.findall(r"\b(broker_[a-z_]+)\b", text)
    for name in names:
        if name not in series:
            problems.append(f"{name} is not a series the broker exposes")

    def labels_of(name: str) -> frozenset[str]:
        return series.get(name, frozenset()) | TARGET_LABELS

    for match in re.finditer(r"\b(broker_[a-z_]+)\s*\{([^}]*)\}", text):
        name, matchers = match.groups()
        for label in re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", matchers):
            if name in series and label not in labels_of(name):
                problems.append(f"{name} has no label {label!r}")

    for match in re.finditer(r"\b(by|without)\s*\(([^)]*)\)\s*", text):
        if match.end() >= len(text) or text[match.end()] != "(":
            problems.append(
                f"write aggregations as `agg {match.group(1)} (...) (...)`: {expr!r}",
            )
            continue
        argument = text[match.end() : closing_paren(text, match.end()) + 1]
        for label in label_list(match.group(2)):
            for name in set(re.findall(r"\b(broker_[a-z_]+)\b", argument)):
                if name in series and label not in labels_of(name):
                    problems.append(f"{match.group(1)} ({label}) over {name}, which lacks it")

    everywhere = set().union(*(labels_of(name) for name in names)) if names else set()
    for match in re.finditer(r"\b(?:on|ignoring|group_left|group_right)\s*\(([^)]*)\)", text):
        for label in label_list(match.group(1)) - everywhere:
            problems.append(f"vector matching on {label!r}, which no series here has")
    return problems


def dockerfile_instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` with continuation lines joined and comments dropped."""
    logical: list[str] = []
    current = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append(current + stripped)
        current = ""
    instructions = []
    for entry in logical:
        keyword, _, rest = entry.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    return instructions


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instruction in dockerfile_instructions():
        if instruction[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def dockerfile_exec_form(keyword: str) -> list[str]:
    values = [rest for key, rest in dockerfile_instructions() if key == keyword]
    assert values, f"the Dockerfile has no {keyword}"
    parsed = json.loads(values[-1])
    assert isinstance(parsed, list), f"{keyword} must be in exec (JSON) form"
    return [str(item) for item in parsed]


def option(argv: list[str], name: str) -> str:
    assert name in argv, f"{name} missing from {argv}"
    return argv[argv.index(name) + 1]


def check_broker_config(text: str) -> BrokerConfig:
    """What ``broker check-config`` does: parse, cross-check, bind tools to backends."""
    config = parse_config(tomllib.loads(text))
    build_registry(config, secrets=SECRETS)
    return config


# -- promtool -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def promtool() -> str:
    found = os.environ.get("PROMTOOL") or shutil.which("promtool")
    if not found:
        message = "promtool not found: set PROMTOOL or run under scripts/with-promtool"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def run_promtool(promtool: str, *args: str | Path) -> str:
    result = subprocess.run(
        [promtool, *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"promtool {' '.join(map(str, args))}:\n{output}"
    return output


def test_alert_rules_pass_promtool_check(promtool: str) -> None:
    output = run_promtool(promtool, "check", "rules", ALERTS)
    assert f"SUCCESS: {len(alert_rules())} rules found" in output


def test_alert_unit_tests_pass(promtool: str) -> None:
    output = run_promtool(promtool, "test", "rules", ALERTS_TEST)
    assert "SUCCESS" in output


def test_prometheus_config_passes_promtool_check_with_its_rule_files(promtool: str) -> None:
    output = run_promtool(promtool, "check", "config", PROMETHEUS_CONFIG)
    assert "SUCCESS" in output
    config = load_yaml(PROMETHEUS_CONFIG)
    # Relative to the config file, which compose mounts beside the rules in /etc/prometheus.
    assert [PROMETHEUS / name for name in config["rule_files"]] == [ALERTS]


def test_dashboard_queries_are_valid_promql(promtool: str, tmp_path: Path) -> None:
    rules = [
        {"record": f"dashboard:query_{index}", "expr": grafana_substituted(expr)}
        for index, (_, expr) in enumerate(dashboard_queries())
    ]
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    run_promtool(promtool, "check", "rules", path)


# -- metric and label names against a real broker -----------------------------------------------


@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, frozenset[str]]:
    """Every series name a freshly built demo broker can expose, with its label names."""
    config = with_private_ledger(load_config(DEMO_CONFIG), tmp_path_factory.mktemp("ledger"))
    app = create_app(config, secrets=SECRETS)
    metrics = app.state.broker.metrics
    with TestClient(app) as client:
        response = client.get("/metrics")
    assert response.status_code == 200
    families = {f.name: f.type for f in metrics.registry.collect()}
    # Label names are declared on the metric objects; a family with no sample yet (most of
    # them, in a fresh process) shows none in the text format.
    wrappers = [value for value in vars(metrics).values() if isinstance(value, MetricWrapperBase)]
    declared = {w.describe()[0].name: frozenset(w._labelnames) for w in wrappers}
    # Collectors read at scrape time (backend guards, load) declare their families themselves.
    declared |= {
        family.name: frozenset(family._labelnames)
        for collector in metrics.collectors
        for family in collector.describe()
    }
    served = {f.name for f in text_string_to_metric_families(response.text)}
    served = {  # the text format also lists counters' and histograms' _created as gauges
        name
        for name in served
        if name.startswith("broker_")
        and not (name.endswith("_created") and name.removesuffix("_created") in families)
    }
    assert served == set(families) == set(declared), "metric_families.py and /metrics disagree"

    series: dict[str, frozenset[str]] = {}
    for name, kind in families.items():
        labels = declared[name]
        if kind == "counter":
            series[f"{name}_total"] = series[f"{name}_created"] = labels
        elif kind == "gauge":
            series[name] = labels
        elif kind == "histogram":
            series[f"{name}_bucket"] = labels | {"le"}
            series[f"{name}_count"] = series[f"{name}_sum"] = labels
            series[f"{name}_created"] = labels
        else:
            raise AssertionError(f"{name}: no rule for metric type {kind}")
    return series


def test_the_inventory_holds_the_documented_metrics(exposed: dict[str, frozenset[str]]) -> None:
    assert exposed["broker_proposals_total"] == {"tool", "decision", "category", "code"}
    assert exposed["broker_decision_duration_seconds_bucket"] == {"tool", "le"}
    assert exposed["broker_ledger_unavailable"] == frozenset()


def test_the_checker_catches_unknown_names_and_labels(exposed: dict[str, frozenset[str]]) -> None:
    assert (
        promql_problems('sum by (tool) (rate(broker_proposals_total{code="x"}[5m]))', exposed) == []
    )
    assert promql_problems("rate(broker_proposal_total[5m])", exposed)
    assert promql_problems("rate(broker_proposals_total_bucket[5m])", exposed)
    assert promql_problems('broker_ledger_unavailable{tool="x"}', exposed)
    assert promql_problems("sum by (route) (rate(broker_proposals_total[5m]))", exposed)
    assert promql_problems(
        "sum by (le) (rate(broker_decision_duration_seconds_count[5m]))", exposed
    )
    assert promql_problems("sum(rate(broker_retries_total[5m])) by (tool)", exposed)


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: rule["alert"])
def test_alert_expressions_use_only_exposed_metrics_and_labels(
    rule: dict[str, Any], exposed: dict[str, frozenset[str]]
) -> None:
    assert re.search(r"\bbroker_", rule["expr"]) or "up{" in rule["expr"]
    assert promql_problems(rule["expr"], exposed) == []


def test_dashboard_queries_use_only_exposed_metrics_and_labels(
    exposed: dict[str, frozenset[str]],
) -> None:
    problems = [
        f"{where}: {problem}"
        for where, expr in dashboard_queries()
        for problem in promql_problems(expr, exposed)
    ]
    assert problems == []


# -- alert rules --------------------------------------------------------------------------------


def test_every_required_alert_exists_with_for_severity_and_annotations() -> None:
    rules = alert_rules()
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names)), "duplicate alert names"
    assert set(names) >= REQUIRED_ALERTS
    for rule in rules:
        assert re.fullmatch(r"\d+[smh]", str(rule.get("for", ""))), f"{rule['alert']}: no `for`"
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert rule["annotations"]["summary"].strip(), rule["alert"]
        assert rule["annotations"]["description"].strip(), rule["alert"]


def test_every_alert_has_a_unit_test() -> None:
    tests = load_yaml(ALERTS_TEST)
    assert tests["rule_files"] == [ALERTS.name]
    tested = {
        case["alertname"]
        for test in tests["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")  # a test that only expects silence proves little
    }
    assert {rule["alert"] for rule in alert_rules()} <= tested
    assert {"BrokerImpliedWriteViolation", "BrokerLedgerUnavailable"} <= tested


def test_every_alert_has_a_runbook_line() -> None:
    """deploy/README.md's runbook says, for each alert, what to look at first."""
    text = DEPLOY_README.read_text(encoding="utf-8")
    match = re.search(r"^### Runbook\n(.*?)(?=^##)", text, re.M | re.S)
    assert match, "deploy/README.md has no '### Runbook' section"
    lines = {
        m.group(1): m.group(2) for m in re.finditer(r"^- `(\w+)`: (.+)$", match.group(1), re.M)
    }
    missing = sorted({rule["alert"] for rule in alert_rules()} - set(lines))
    assert not missing, f"no runbook line for {missing}"
    assert all(len(line) > 40 for line in lines.values())


def readme_queries() -> list[str]:
    """The PromQL of deploy/README.md's ```promql blocks, one query after each ``#`` comment."""
    text = DEPLOY_README.read_text(encoding="utf-8")
    queries: list[str] = []
    for block in re.findall(r"^```promql\n(.*?)^```", text, re.M | re.S):
        for part in re.split(r"^#.*$", block, flags=re.M):
            if part.strip():
                queries.append(part.strip())
    return queries


def test_the_readme_queries_are_valid_promql_on_exposed_metrics(
    promtool: str, tmp_path: Path, exposed: dict[str, frozenset[str]]
) -> None:
    queries = readme_queries()
    assert any("broker_execution_cost_usd_total" in q for q in queries)  # $ per successful action
    rules = [{"record": f"readme:query_{i}", "expr": q} for i, q in enumerate(queries)]
    path = tmp_path / "readme_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "readme", "rules": rules}]}))
    run_promtool(promtool, "check", "rules", path)
    assert [problem for q in queries for problem in promql_problems(q, exposed)] == []


# -- Grafana ------------------------------------------------------------------------------------


def test_the_dashboard_uses_the_provisioned_datasource() -> None:
    source = provisioned_datasource()
    assert source["type"] == "prometheus"
    compose = load_yaml(COMPOSE)
    assert source["url"] == "http://prometheus:9090"
    assert "prometheus" in compose["services"]
    uid = source["uid"]
    board = dashboard()
    assert board["uid"] and board["title"]
    panels = [p for p in dashboard_panels() if p["type"] != "row"]
    assert len(panels) >= 10
    for panel in panels:
        assert panel["datasource"]["uid"] == uid, panel["title"]
        assert panel["targets"], f"panel {panel['title']!r} has no targets"
        for target in panel["targets"]:
            assert target["expr"].strip(), panel["title"]
            assert target.get("datasource", {"uid": uid})["uid"] == uid, panel["title"]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            assert variable["datasource"]["uid"] == uid


def test_the_dashboard_covers_the_taxonomy() -> None:
    queries = " ".join(expr for _, expr in dashboard_queries())
    for needle in [
        "sum by (decision)",
        "sum by (category)",
        "sum by (category, code)",
        'decision="approved"',
        "broker_executions_total",
        "broker_decision_duration_seconds_bucket",
        "broker_execution_duration_seconds_bucket",
        "broker_idempotency_replays_total",
        "broker_store_errors_total",
        "broker_ledger_errors_total",
        "broker_ledger_unavailable",
        "broker_implied_write_violations_total",
        "broker_execution_cost_usd_total",
        "broker_outcome_unknown_keys",
        "broker_ledger_unsigned_records",
        "broker_approvals_pending",
    ]:
        assert needle in queries, f"no dashboard query with {needle!r}"
    assert "histogram_quantile(0.95" in queries


def test_dashboard_panels_have_unique_ids_and_do_not_overlap() -> None:
    panels = list(dashboard_panels())
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        mine = {
            (x, y)
            for x in range(pos["x"], pos["x"] + pos["w"])
            for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not cells & mine, f"panel {panel['title']!r} overlaps another"
        cells |= mine


def test_dashboard_provisioning_points_at_the_mounted_dashboards() -> None:
    providers = [
        provider
        for path in sorted(DASHBOARD_PROVIDERS.glob("*.y*ml"))
        for provider in load_yaml(path)["providers"]
    ]
    assert providers
    grafana = load_yaml(COMPOSE)["services"]["grafana"]
    mounts = dict(volume.split(":")[:2] for volume in grafana["volumes"])
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
    for provider in providers:
        assert provider["type"] == "file"
        assert mounts["./grafana/dashboards"] == provider["options"]["path"]


# -- compose ------------------------------------------------------------------------------------


def test_compose_runs_two_brokers_on_redis_with_prometheus_and_grafana() -> None:
    compose = load_yaml(COMPOSE)
    services = compose["services"]
    brokers = {
        name: service
        for name, service in services.items()
        if "deploy/Dockerfile" in str(service.get("build", {}).get("dockerfile", ""))
    }
    assert set(brokers) == {"broker-1", "broker-2"}
    cmd = dockerfile_exec_form("CMD")
    host_ports = set()
    for name, service in brokers.items():
        assert (COMPOSE.parent / service["build"]["context"]).resolve() == ROOT, name
        assert service["environment"]["REDIS_URL"].startswith("redis://redis:"), name
        assert service["environment"]["BROKER_TOKEN_SIGNING_KEY"], name
        mounts = dict(volume.split(":")[:2] for volume in service["volumes"])
        assert mounts["./broker.toml"] == option(cmd, "--config"), name
        (published,) = service["ports"]
        host_port, container_port = published.rsplit(":", 2)[-2:]
        assert container_port == option(cmd, "--port"), name
        host_ports.add(host_port)
    assert len(host_ports) == 2, "each broker needs its own host port"
    assert brokers["broker-1"]["environment"] == brokers["broker-2"]["environment"]
    assert brokers["broker-1"]["volumes"] == brokers["broker-2"]["volumes"]

    command = services["redis"]["command"]
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    assert option(argv, "--appendonly") == "yes"
    assert option(argv, "--appendfsync") == "everysec"
    assert option(argv, "--maxmemory-policy") == "noeviction"

    prometheus = services["prometheus"]
    assert "./prometheus:/etc/prometheus:ro" in prometheus["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    scraped = {
        target
        for job in load_yaml(PROMETHEUS_CONFIG)["scrape_configs"]
        if job["job_name"] == "broker"
        for static in job["static_configs"]
        for target in static["targets"]
    }
    assert scraped == {f"{name}:{option(cmd, '--port')}" for name in brokers}
    assert "grafana" in services

    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (COMPOSE.parent / source).exists(), f"compose mounts missing {source}"


# -- Kubernetes ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def k8s() -> dict[str, dict[str, Any]]:
    """The one object of each manifest, by kind, after checking kind and apiVersion."""
    objects = {}
    for filename, (api_version, kind) in K8S_KINDS.items():
        manifest = only(K8S / filename)
        assert (manifest["apiVersion"], manifest["kind"]) == (api_version, kind), filename
        assert manifest["metadata"]["name"], filename
        objects[kind] = manifest
    return objects


def test_kustomization_lists_every_manifest() -> None:
    kustomization = load_yaml(K8S / "kustomization.yaml")
    assert kustomization["kind"] == "Kustomization"
    assert set(kustomization["resources"]) == set(K8S_KINDS)
    manifests = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert manifests == set(K8S_KINDS)


def broker_container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    result: dict[str, Any] = container
    return result


def test_the_deployment_is_hardened_and_probed(k8s: dict[str, dict[str, Any]]) -> None:
    deployment = k8s["Deployment"]
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    container = broker_container(deployment)
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind]), kind

    ports = {p["name"] for p in container["ports"]} | {
        p["containerPort"] for p in container["ports"]
    }
    assert container["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] in ports, probe

    # Writable places on a read-only root: emptyDirs, including var/ where the key lives.
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
    assert "emptyDir" in mounts["/app/var"]
    config = check_broker_config(k8s["ConfigMap"]["data"]["broker.toml"])
    assert Path(config.service.ledger_key_path).is_relative_to("/app/var")


def test_the_deployment_reads_secrets_from_the_secret(k8s: dict[str, dict[str, Any]]) -> None:
    secret = k8s["Secret"]
    keys = set(secret.get("stringData", {})) | set(secret.get("data", {}))
    env = {e["name"]: e for e in broker_container(k8s["Deployment"])["env"]}
    for name in ("REDIS_URL", "BROKER_TOKEN_SIGNING_KEY"):
        reference = env[name]["valueFrom"]["secretKeyRef"]
        assert reference["name"] == secret["metadata"]["name"], name
        assert reference["key"] in keys, name
        assert "value" not in env[name], name


def test_the_secret_holds_only_marked_placeholders(k8s: dict[str, dict[str, Any]]) -> None:
    values = k8s["Secret"]["stringData"]
    assert "data" not in k8s["Secret"]
    for key, value in values.items():
        assert "CHANGE-ME" in value, f"{key} does not look like a placeholder"


def test_the_config_comes_from_the_configmap_at_the_images_config_path(
    k8s: dict[str, dict[str, Any]],
) -> None:
    deployment = k8s["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    container = broker_container(deployment)
    config_path = Path(option(dockerfile_exec_form("CMD"), "--config"))
    if "args" in container:
        assert option(container["args"], "--config") == str(config_path)
    assert "command" not in container, "keep the image's ENTRYPOINT"
    (volume,) = [v for v in pod["volumes"] if "configMap" in v]
    assert volume["configMap"]["name"] == k8s["ConfigMap"]["metadata"]["name"]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["mountPath"] == str(config_path.parent)
    assert config_path.name in k8s["ConfigMap"]["data"]


def test_the_configmap_holds_deploy_broker_toml_a_valid_config(
    k8s: dict[str, dict[str, Any]],
) -> None:
    text = k8s["ConfigMap"]["data"]["broker.toml"]
    assert text == BROKER_TOML.read_text(encoding="utf-8"), (
        "k8s/configmap.yaml differs from deploy/broker.toml: regenerate it"
    )
    config = check_broker_config(text)
    assert config.service.ledger == "redis"
    assert config.service.redis_url
    assert config.tools


def test_service_hpa_and_pdb_select_the_deployment(k8s: dict[str, dict[str, Any]]) -> None:
    deployment = k8s["Deployment"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    container = broker_container(deployment)
    ports = {p["name"] for p in container["ports"]} | {
        p["containerPort"] for p in container["ports"]
    }

    service = k8s["Service"]["spec"]
    assert service["selector"].items() <= pod_labels.items()
    assert all(port["targetPort"] in ports for port in service["ports"])

    hpa = k8s["HorizontalPodAutoscaler"]["spec"]
    assert hpa["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    assert hpa["minReplicas"] >= 2
    assert hpa["maxReplicas"] >= hpa["minReplicas"]
    (metric,) = hpa["metrics"]
    assert metric["type"] == "Resource"
    assert metric["resource"]["name"] == "cpu"

    pdb = k8s["PodDisruptionBudget"]["spec"]
    assert pdb["selector"]["matchLabels"] == selector
    assert pdb["minAvailable"] == 1


# -- Dockerfile ---------------------------------------------------------------------------------


def test_the_dockerfile_builds_in_stages_and_runs_unprivileged(
    k8s: dict[str, dict[str, Any]],
) -> None:
    stages = dockerfile_stages()
    assert len(stages) >= 2
    users = [rest for key, rest in stages[-1] if key == "USER"]
    assert users, "the runtime stage sets no USER"
    user, _, group = users[-1].partition(":")
    assert user.isdigit() and int(user) != 0, "USER must be a numeric, non-root UID"
    assert not group or (group.isdigit() and int(group) != 0)
    pod = k8s["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == int(user)

    assert dockerfile_exec_form("ENTRYPOINT") == ["broker"]
    cmd = dockerfile_exec_form("CMD")
    assert cmd[0] == "serve"
    # Inside a container, loopback would be unreachable from the port mapping and the probes.
    assert option(cmd, "--host") == "0.0.0.0"  # noqa: S104
    assert [rest for key, rest in stages[-1] if key == "EXPOSE"] == [option(cmd, "--port")]
    (healthcheck,) = [rest for key, rest in stages[-1] if key == "HEALTHCHECK"]
    # It follows the port the server was started with (broker.healthcheck), never a fixed one.
    assert '"-m", "broker.healthcheck"' in healthcheck
    assert f":{option(cmd, '--port')}" not in healthcheck


def test_the_runtime_stage_copies_only_the_venv_and_the_config() -> None:
    runtime = dockerfile_stages()[-1]
    copies = [rest.split() for key, rest in runtime if key == "COPY"]
    assert copies
    for words in copies:
        *sources, destination = [w for w in words if not w.startswith("--")]
        if any(w.startswith("--from=") for w in words):
            assert destination.startswith("/opt/venv"), words
        else:
            assert sources == ["deploy/broker.toml"], words
            assert destination == option(dockerfile_exec_form("CMD"), "--config")


def test_the_dockerignore_lets_in_what_the_build_copies() -> None:
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").splitlines()
    assert "*" in ignore, "expected an allow-list (`*` then `!path` lines)"
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for stage in dockerfile_stages():
        for key, rest in stage:
            if key != "COPY" or "--from=" in rest:
                continue
            *sources, _ = rest.split()
            for source in sources:
                assert source.rstrip("/") in allowed, f"{source} is excluded from the context"
                assert (ROOT / source).exists(), source


def test_deploy_broker_toml_is_a_valid_production_config() -> None:
    config = check_broker_config(BROKER_TOML.read_text(encoding="utf-8"))
    assert config.service.ledger == "redis"
    assert config.service.redis_url
    demo = load_config(DEMO_CONFIG)
    assert set(config.tools) == set(demo.tools)
    assert all(not token.sha256.strip("0") for token in config.tokens), (
        "static tokens in deploy/broker.toml must be the all-zero placeholder"
    )
