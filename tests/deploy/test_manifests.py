"""The container image, compose file and Kubernetes manifests agree with each other.

No container engine runs here, so these tests parse every file (YAML validated against the
Compose specification and the Kubernetes schemas, a small reader for the Dockerfile and
nginx.conf) and check what a broken deployment would get wrong: missing fields, mismatched
images and ports, probes that miss /healthz, migrations raced by replicas, a Secret nobody
mounts, a root user, a command or variable the code does not know.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from deniable.cli import main
from deniable.collector import DEFAULT_PORT
from deniable.collector.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
EXAMPLE_SECRET = K8S / "examples" / "secret.yaml"
COLLECTORS = ("collector-1", "collector-2", "collector-3")


def _version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


IMAGE = f"deniable:{_version()}"


# ---------------------------------------------------------------- Dockerfile


def _dockerfile_lines() -> list[str]:
    """Logical Dockerfile instructions: continuation lines joined, comments dropped."""
    text = (DEPLOY / "Dockerfile").read_text()
    joined = re.sub(r"\\\n", " ", text)
    return [
        line.strip()
        for line in joined.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def _stages() -> list[list[str]]:
    """Instructions grouped by build stage (each starts with FROM)."""
    stages: list[list[str]] = []
    for line in _dockerfile_lines():
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def _instructions(stage: list[str], keyword: str) -> list[str]:
    return [
        line[len(keyword) :].strip() for line in stage if line.upper().startswith(keyword + " ")
    ]


def _exposed_port() -> int:
    exposed = _instructions(_stages()[-1], "EXPOSE")
    assert len(exposed) == 1, "the runtime stage exposes exactly one port"
    return int(exposed[0].split("/")[0])


def test_image_port_is_the_collector_default() -> None:
    """`deniable serve`, `python -m deniable.collector` and the CLI's default URL all use it."""
    assert _exposed_port() == DEFAULT_PORT


PORT_PATTERN = re.compile(r"https?://(?:127\.0\.0\.1|localhost):(\d+)(/[\w/]*)")


def test_dockerfile_is_multi_stage_and_runtime_copies_from_build() -> None:
    stages = _stages()
    assert len(stages) >= 2
    runtime = stages[-1]
    copies_from = [c for c in _instructions(runtime, "COPY") if c.startswith("--from=")]
    assert copies_from, "the runtime stage copies its artefacts from the build stage"
    build_names = {s[0].split()[-1] for s in stages[:-1] if " AS " in s[0].upper()}
    assert {c.split()[0].removeprefix("--from=") for c in copies_from} <= build_names


def test_dockerfile_runs_as_non_root_user() -> None:
    users = _instructions(_stages()[-1], "USER")
    assert users, "the runtime stage sets USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")
    assert user == str(_k8s_run_as_user()), "the image uid is the one the manifests run as"


def test_dockerfile_healthcheck_hits_healthz_on_the_exposed_port() -> None:
    checks = _instructions(_stages()[-1], "HEALTHCHECK")
    assert len(checks) == 1
    found = PORT_PATTERN.findall(checks[0])
    assert found == [(str(_exposed_port()), "/healthz")]


def test_dockerfile_is_configured_by_environment_only() -> None:
    runtime = _stages()[-1]
    env = " ".join(_instructions(runtime, "ENV"))
    assert f"DENIABLE_PORT={_exposed_port()}" in env
    for secret in ("DENIABLE_ADMIN_TOKEN", "DENIABLE_INGEST_KEY", "DENIABLE_DATABASE_URL"):
        assert secret not in env, f"{secret} must come from the environment, not the image"
    assert _instructions(runtime, "ENTRYPOINT") == ['["deniable"]']
    assert _instructions(runtime, "CMD") == ['["serve"]']


def test_dockerfile_copies_every_package_and_nothing_ignored() -> None:
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    kept = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    copied: set[str] = set()
    for copy in _instructions(_stages()[0], "COPY"):
        for source in shlex.split(copy)[:-1]:
            assert (ROOT / source).exists(), f"COPY {source}: no such path in the repository"
            assert source.rstrip("/") in kept, f"COPY {source}: excluded by the .dockerignore"
            copied.add(source.rstrip("/"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_roots = set(project["tool"]["setuptools"]["packages"]["find"]["where"])
    assert package_roots | {"pyproject.toml", project["project"]["readme"]} <= copied


# ---------------------------------------------------------------- compose


def _compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def _healthcheck_url(test: list[str]) -> tuple[str, str]:
    found = PORT_PATTERN.findall(" ".join(test))
    assert len(found) == 1, f"healthcheck {test} must request one loopback URL"
    return found[0]


def test_compose_file_follows_the_compose_specification() -> None:
    schema_file = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(schema_file.read_text())
    errors = sorted(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft202012Validator(schema).iter_errors(_compose())
    )
    assert not errors


def test_compose_has_postgres_migration_three_collectors_and_a_load_balancer() -> None:
    services = _compose()["services"]
    assert set(services) == {"postgres", "migrate", *COLLECTORS, "lb", "retention"}
    for name in ("migrate", "retention", *COLLECTORS):
        assert services[name]["image"] == IMAGE, f"{name} runs the image the Dockerfile builds"
        assert services[name]["build"]["dockerfile"] == "deploy/Dockerfile"
        assert (DEPLOY / services[name]["build"]["context"] / "deploy" / "Dockerfile").exists()


def test_compose_migration_runs_once_before_the_collectors() -> None:
    services = _compose()["services"]
    migrate = services["migrate"]
    assert migrate["command"] == ["migrate"]
    assert migrate["restart"] == "no", "a one-shot service"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in COLLECTORS:
        collector = services[name]
        assert collector["command"] == ["serve"]
        assert collector["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert collector["environment"]["DENIABLE_MIGRATE_ON_START"] == "false"


def test_compose_collectors_share_one_database_and_take_secrets_from_the_environment() -> None:
    services = _compose()["services"]
    urls = {
        services[name]["environment"]["DENIABLE_DATABASE_URL"] for name in (*COLLECTORS, "migrate")
    }
    assert len(urls) == 1
    (url,) = urls
    assert url.startswith("postgresql://") and "@postgres:5432/" in url
    assert services["postgres"]["environment"]["POSTGRES_DB"] == url.rsplit("/", 1)[1]
    for name in (*COLLECTORS, "migrate"):
        token = services[name]["environment"]["DENIABLE_ADMIN_TOKEN"]
        assert re.fullmatch(r"\$\{DENIABLE_ADMIN_TOKEN:\?[^}]+\}", token), (
            "required, never a literal"
        )


def test_compose_collectors_listen_and_are_checked_on_the_image_port() -> None:
    port = str(_exposed_port())
    for name in COLLECTORS:
        collector = _compose()["services"][name]
        assert collector["environment"]["DENIABLE_PORT"] == port
        assert collector["expose"] == [port]
        assert _healthcheck_url(collector["healthcheck"]["test"]) == (port, "/healthz")
        assert collector["stop_signal"] == "SIGTERM"


def _nginx_conf() -> str:
    return (DEPLOY / "nginx.conf").read_text()


def test_load_balancer_proxies_to_every_collector_on_the_image_port() -> None:
    services = _compose()["services"]
    lb = services["lb"]
    assert "./nginx.conf:/etc/nginx/nginx.conf:ro" in lb["volumes"]
    conf = _nginx_conf()
    upstream = re.search(r"upstream\s+(\w+)\s*\{([^}]*)\}", conf)
    assert upstream is not None
    servers = re.findall(r"^\s*server\s+([\w.-]+):(\d+)", upstream.group(2), re.MULTILINE)
    assert sorted(servers) == [(name, str(_exposed_port())) for name in COLLECTORS]
    assert f"proxy_pass http://{upstream.group(1)};" in conf
    listen = re.search(r"listen\s+(\d+);", conf)
    assert listen is not None and lb["ports"] == [f"{listen.group(1)}:{listen.group(1)}"]
    assert set(lb["depends_on"]) == set(COLLECTORS)


def test_load_balancer_neither_logs_nor_forwards_client_addresses() -> None:
    conf = _nginx_conf()
    assert "$remote_addr" not in conf and "$proxy_add_x_forwarded_for" not in conf
    assert 'proxy_set_header X-Forwarded-For "";' in conf
    formats = re.findall(r"access_log\s+\S+\s+(\w+);", conf)
    assert formats and all(re.search(rf"log_format\s+{f}\s", conf) for f in formats)
    assert "non_idempotent" in conf, "ingestion is idempotent, so failed POSTs are retried"


# ---------------------------------------------------------------- Kubernetes


def _k8s_documents() -> dict[str, dict[str, Any]]:
    """Every manifest in deploy/k8s by kind (one object per kind)."""
    documents: dict[str, dict[str, Any]] = {}
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            assert doc["kind"] not in documents, f"{path.name}: a second {doc['kind']}"
            documents[doc["kind"]] = doc
    return documents


def _pod_spec(kind: str) -> dict[str, Any]:
    spec = _k8s_documents()[kind]["spec"]
    if kind == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec["template"]["spec"]


def _k8s_run_as_user() -> int:
    return _pod_spec("Deployment")["securityContext"]["runAsUser"]


def _container(kind: str) -> dict[str, Any]:
    containers = _pod_spec(kind)["containers"]
    assert len(containers) == 1
    return containers[0]


def test_every_k8s_manifest_has_the_required_fields_and_one_namespace() -> None:
    docs = _k8s_documents()
    expected = {
        "Namespace",
        "ConfigMap",
        "Job",
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "Ingress",
        "CronJob",
    }
    assert set(docs) == expected
    namespace = docs["Namespace"]["metadata"]["name"]
    for kind, doc in docs.items():
        assert doc["apiVersion"] and doc["metadata"]["name"], kind
        if kind != "Namespace":
            assert doc["metadata"]["namespace"] == namespace, kind
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert kustomization["namespace"] == namespace
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(files)


def test_every_k8s_manifest_validates_against_the_kubernetes_schema() -> None:
    for kind, doc in _k8s_documents().items():
        try:
            kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{kind}: {exc.message} at {'/'.join(map(str, exc.path))}")


def test_deployment_runs_replicas_of_the_image_with_readiness_on_the_database() -> None:
    deployment = _k8s_documents()["Deployment"]
    assert deployment["spec"]["replicas"] >= 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    container = _container("Deployment")
    assert container["args"] == ["serve"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": _exposed_port()}
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["DENIABLE_PORT"] == str(_exposed_port())
    paths = {"readinessProbe": "/readyz", "livenessProbe": "/healthz", "startupProbe": "/healthz"}
    for probe, path in paths.items():
        get = container[probe]["httpGet"]
        assert get["path"] == path, probe
        assert ports.get(get["port"], get["port"]) == _exposed_port(), probe
    requests = container["resources"]["requests"]
    assert requests["cpu"] and requests["memory"]
    assert "memory" in container["resources"]["limits"]


def test_the_ingress_exposes_the_api_only() -> None:
    """/metrics needs no token: it must not be reachable through the public Ingress."""
    ingress = _k8s_documents()["Ingress"]
    paths = [p for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]]
    assert [(p["path"], p["pathType"]) for p in paths] == [("/v1/", "Prefix")]
    locations = re.findall(r"location\s+(\S+)\s*\{([^}]*)\}", _nginx_conf())
    proxied = [path for path, body in locations if "proxy_pass" in body]
    assert proxied == ["/v1/"]
    assert any(path == "/" and "return 404" in body for path, body in locations)


def test_the_release_never_applies_a_secret() -> None:
    """`kubectl apply -k` must not overwrite the Secret an operator created by hand."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    kinds = {
        doc["kind"]
        for name in kustomization["resources"]
        for doc in yaml.safe_load_all((K8S / name).read_text())
    }
    assert "Secret" not in kinds
    assert "Secret" in {d["kind"] for d in yaml.safe_load_all(EXAMPLE_SECRET.read_text())}


def test_the_image_is_set_once_in_the_kustomization() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    (entry,) = kustomization["images"]
    assert f"{entry['newName']}:{entry['newTag']}" == IMAGE
    for kind in ("Deployment", "Job", "CronJob"):
        assert _container(kind)["image"] == entry["name"], f"{kind} names the image, untagged"


def test_the_pre_rollout_phase_holds_what_the_migration_needs() -> None:
    """The release applies `-l deniable.io/phase=pre-rollout` first: namespace, config, Job."""
    phase = {
        kind
        for kind, doc in _k8s_documents().items()
        if doc["metadata"].get("labels", {}).get("deniable.io/phase") == "pre-rollout"
    }
    assert phase == {"Namespace", "ConfigMap", "Job"}
    assert "-l deniable.io/phase=pre-rollout" in (ROOT / "docs" / "operations.md").read_text()


def test_the_example_secret_holds_placeholders_the_collector_refuses() -> None:
    from deniable.service.tokens import token_problem

    (secret,) = yaml.safe_load_all(EXAMPLE_SECRET.read_text())
    for key in ("DENIABLE_ADMIN_TOKEN", "DENIABLE_INGEST_KEY"):
        assert token_problem(secret["stringData"][key]) is not None, key


def test_deployment_and_job_read_the_secret_that_holds_the_tokens() -> None:
    docs = _k8s_documents()
    (secret,) = yaml.safe_load_all(EXAMPLE_SECRET.read_text())
    assert {"DENIABLE_ADMIN_TOKEN", "DENIABLE_INGEST_KEY", "DENIABLE_DATABASE_URL"} <= set(
        secret["stringData"]
    )
    config = docs["ConfigMap"]
    for kind in ("Deployment", "Job"):
        sources = _container(kind)["envFrom"]
        assert {"secretRef": {"name": secret["metadata"]["name"]}} in sources, kind
        assert {"configMapRef": {"name": config["metadata"]["name"]}} in sources, kind
    assert not set(secret["stringData"]) & set(config["data"]), "secrets stay out of the ConfigMap"


def test_migration_job_runs_once_with_the_same_image() -> None:
    job = _k8s_documents()["Job"]
    container = _container("Job")
    assert container["args"] == ["migrate"]
    assert _pod_spec("Job")["restartPolicy"] in ("Never", "OnFailure")
    assert job["spec"]["backoffLimit"] >= 1
    assert "parallelism" not in job["spec"] or job["spec"]["parallelism"] == 1
    assert "completions" not in job["spec"] or job["spec"]["completions"] == 1
    assert "migrate" not in _container("Deployment")["args"], "replicas never migrate"
    assert _k8s_documents()["ConfigMap"]["data"]["DENIABLE_MIGRATE_ON_START"] == "false"


def test_retention_runs_daily_against_the_service_with_the_admin_token() -> None:
    docs = _k8s_documents()
    cron = docs["CronJob"]["spec"]
    assert len(cron["schedule"].split()) == 5
    assert cron["concurrencyPolicy"] == "Forbid"
    container = _container("CronJob")
    assert container["args"] == ["retention"]
    env = {e["name"]: e for e in container["env"]}
    token = env["DENIABLE_ADMIN_TOKEN"]["valueFrom"]["secretKeyRef"]
    (secret,) = yaml.safe_load_all(EXAMPLE_SECRET.read_text())
    assert token == {"name": secret["metadata"]["name"], "key": "DENIABLE_ADMIN_TOKEN"}
    service = docs["Service"]
    (port,) = service["spec"]["ports"]
    namespace = docs["Namespace"]["metadata"]["name"]
    expected = f"http://{service['metadata']['name']}.{namespace}.svc:{port['port']}"
    assert env["DENIABLE_COLLECTOR_URL"]["value"] == expected
    compose = _compose()["services"]["retention"]
    assert compose["command"] == ["retention"]
    assert compose["profiles"] == ["maintenance"], "run on demand, not by 'up'"
    listen = re.search(r"listen\s+(\d+);", _nginx_conf())
    assert listen is not None
    assert compose["environment"]["DENIABLE_COLLECTOR_URL"] == f"http://lb:{listen.group(1)}"


def test_pods_run_as_the_image_user_without_privileges() -> None:
    for kind in ("Deployment", "Job", "CronJob"):
        pod = _pod_spec(kind)["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] == _k8s_run_as_user()
        container = _container(kind)["securityContext"]
        assert container["allowPrivilegeEscalation"] is False
        assert container["readOnlyRootFilesystem"] is True
        assert container["capabilities"]["drop"] == ["ALL"]


def test_service_hpa_pdb_and_ingress_point_at_the_deployment() -> None:
    docs = _k8s_documents()
    deployment = docs["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = docs["Service"]
    assert service["spec"]["selector"].items() <= labels.items()
    (port,) = service["spec"]["ports"]
    container_ports = {p["name"]: p["containerPort"] for p in _container("Deployment")["ports"]}
    assert container_ports.get(port["targetPort"], port["targetPort"]) == _exposed_port()
    hpa = docs["HorizontalPodAutoscaler"]["spec"]
    assert hpa["scaleTargetRef"] == {
        "apiVersion": deployment["apiVersion"],
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    assert deployment["spec"]["replicas"] <= hpa["minReplicas"] <= hpa["maxReplicas"]
    assert hpa["metrics"][0]["resource"]["name"] == "cpu"
    pdb = docs["PodDisruptionBudget"]["spec"]
    assert pdb["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["minAvailable"] < hpa["minReplicas"], "a drain can always proceed"
    ingress = docs["Ingress"]["spec"]
    assert ingress["tls"], "the ingress terminates TLS"
    backend = ingress["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": service["metadata"]["name"], "port": {"name": port["name"]}}


def test_graceful_shutdown_outlasts_the_pre_stop_delay() -> None:
    pod = _pod_spec("Deployment")
    pre_stop = _container("Deployment")["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    assert pod["terminationGracePeriodSeconds"] > int(pre_stop[1]) + 10


# ---------------------------------------------------------------- settings and docs


def _deniable_variables() -> set[str]:
    """Every DENIABLE_* variable the image, compose file and manifests set."""
    names: set[str] = set()
    for path in [
        DEPLOY / "Dockerfile",
        DEPLOY / "compose.yaml",
        DEPLOY / "env.example",
        *K8S.glob("*.yaml"),
    ]:
        names |= set(re.findall(r"\b(DENIABLE_[A-Z_]+)\b", path.read_text()))
    return names


def _cli_variables(command_names: tuple[str, ...]) -> set[str]:
    """The environment variables the ``deniable`` commands read through click options."""
    names: set[str] = set()
    commands = [main.cli, *(main.cli.commands[name] for name in command_names)]
    for command in commands:
        for param in command.params:
            envvar = getattr(param, "envvar", None)
            names |= {envvar} if isinstance(envvar, str) else set(envvar or ())
    return names


def _deployed_commands() -> set[str]:
    """The ``deniable`` subcommands the image, compose file and manifests run."""
    commands = {json.loads(_instructions(_stages()[-1], "CMD")[0])[0]}
    for name, service in _compose()["services"].items():
        if service.get("image") == IMAGE:
            commands.add(service["command"][0])
        else:
            assert "command" not in service, name
    for kind in ("Deployment", "Job", "CronJob"):
        commands.add(_container(kind)["args"][0])
    return commands


def test_every_deployed_command_is_a_deniable_command() -> None:
    assert _deployed_commands() == {"serve", "migrate", "retention"}
    assert _deployed_commands() <= set(main.cli.commands)


def test_every_deployment_variable_is_read_by_the_collector_or_its_commands() -> None:
    prefix = Settings.model_config.get("env_prefix", "")
    assert prefix == "DENIABLE_"
    known = {prefix + name.upper() for name in Settings.model_fields}
    known |= _cli_variables(tuple(_deployed_commands()))
    unknown = _deniable_variables() - known
    assert not unknown, f"set in deploy/ but read by nobody: {sorted(unknown)}"


def test_operations_guide_documents_building_this_image() -> None:
    guide = (ROOT / "docs" / "operations.md").read_text()
    assert f"docker build -f deploy/Dockerfile -t {IMAGE} ." in guide
    assert "docker compose -f deploy/compose.yaml up" in guide
    assert "kubectl apply -k deploy/k8s" in guide and "job/deniable-migrate" in guide
