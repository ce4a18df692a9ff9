"""deploy/k8s/examples/archive-cronjob.yaml: retention that archives, valid for Kubernetes and
consistent with the release it replaces the retention CronJob of."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

from deniable.cli import main
from deniable.collector.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
ARCHIVE_JOB = K8S / "examples" / "archive-cronjob.yaml"


def _load(path: Path) -> dict[str, Any]:
    (document,) = yaml.safe_load_all(path.read_text())
    return document


def _container(cronjob: dict[str, Any]) -> dict[str, Any]:
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return container


def test_the_archive_cronjob_validates_against_the_kubernetes_schema() -> None:
    kubernetes_validate.validate(
        _load(ARCHIVE_JOB), kubernetes_validate.latest_version(), strict=True
    )


def test_it_replaces_the_retention_cronjob_never_runs_beside_it() -> None:
    archive, release = _load(ARCHIVE_JOB), _load(K8S / "retention-cronjob.yaml")
    assert archive["metadata"]["name"] == release["metadata"]["name"]
    assert archive["metadata"]["namespace"] == release["metadata"]["namespace"]
    assert archive["spec"]["concurrencyPolicy"] == "Forbid"
    pod = archive["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert (
        pod["securityContext"]
        == release["spec"]["jobTemplate"]["spec"]["template"]["spec"]["securityContext"]
    )
    container = _container(archive)["securityContext"]
    assert container["readOnlyRootFilesystem"] is True
    assert container["allowPrivilegeEscalation"] is False


def test_it_runs_retention_with_an_archive_url_and_variables_the_code_reads() -> None:
    container = _container(_load(ARCHIVE_JOB))
    args = container["args"]
    assert args[0] == "retention" and args[1] == "--archive-to"
    assert re.fullmatch(r"s3://[a-z0-9.-]+/\S+", args[2])
    options = {opt for p in main.cli.commands["retention"].params for opt in p.opts}
    assert "--archive-to" in options
    env = {e["name"]: e for e in container["env"]}
    known = {"DENIABLE_" + name.upper() for name in Settings.model_fields}
    assert {name for name in env if name.startswith("DENIABLE_")} <= known
    ref = env["DENIABLE_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "deniable-secrets", "key": "DENIABLE_DATABASE_URL"}


def test_the_image_can_be_built_with_the_extra_the_archive_needs() -> None:
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert re.search(r"^ARG EXTRAS=server$", dockerfile, re.MULTILINE)
    assert '".[${EXTRAS}]"' in dockerfile
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert "s3fs" in " ".join(extras["s3"]) and "EXTRAS=server,s3" in ARCHIVE_JOB.read_text()
