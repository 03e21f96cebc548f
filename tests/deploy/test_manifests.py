"""deploy/'s Kubernetes manifests: valid against the Kubernetes API's schemas (offline:
kubernetes-validate ships them), no API key anywhere but the Secret, every container
sized and locked down, the workers pointed at the master's Service and ports. Each check
is also run on a copy broken on purpose, to show it can fail."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from tests.deploy import manifest_checks as mc
from zerohop.runner.plan import classes_for
from zerohop.workloads.yaml_io import load_workload_file

pytestmark = pytest.mark.unit

DOCS = Path(__file__).resolve().parents[2] / "docs" / "kubernetes.md"
DOCKERFILE = mc.DEPLOY / "Dockerfile"
NAMESPACE = "zerohop"
# the oldest Kubernetes the manifests are for, and the newest the schemas know
VERSIONS = ["1.28", kubernetes_validate.latest_version()]
LEAKED_KEY = "sk-live-0123456789abcdefXYZ"


@pytest.fixture(scope="module")
def manifests() -> list[mc.Manifest]:
    return mc.load_manifests()


@pytest.fixture(scope="module")
def uid() -> int:
    return mc.dockerfile_user(DOCKERFILE.read_text())


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_is_valid_kubernetes(manifests: list[mc.Manifest], version: str) -> None:
    assert {m.kind for m in manifests} >= {"Namespace", "ConfigMap", "Secret", "Job",
                                            "Deployment", "Service", "PersistentVolumeClaim"}
    assert mc.schema_problems(manifests, version) == []


def test_every_object_is_in_the_zerohop_namespace(manifests: list[mc.Manifest]) -> None:
    assert mc.load_kustomization()["namespace"] == NAMESPACE
    outside = [str(m) for m in manifests
               if m.kind != "Namespace" and m.doc["metadata"].get("namespace") != NAMESPACE]
    assert outside == []


def test_the_shipped_manifests_pass_every_check(manifests: list[mc.Manifest], uid: int) -> None:
    assert mc.all_problems(manifests, uid) == []
    assert mc.kustomization_problems(mc.load_kustomization()) == []
    assert mc.dockerfile_problems(DOCKERFILE.read_text()) == []


def test_the_workload_files_load_and_name_their_classes(manifests: list[mc.Manifest],
                                                        tmp_path: Path) -> None:
    """The settings name files the workloads ConfigMap holds, each a valid zerohop
    workload file, and exactly the user classes that run their kinds (as `zerohop run`
    passes them)."""
    maps = mc.config_maps(manifests)
    settings, files = maps["zerohop-settings"], maps["zerohop-workloads"]
    names = settings["ZEROHOP_WORKLOAD_FILES"].split()
    assert names and set(names) <= files.keys()
    specs = []
    for name in names:
        (tmp_path / name).write_text(files[name])
        specs += load_workload_file(tmp_path / name).workloads
    assert settings["ZEROHOP_USER_CLASSES"].split() == classes_for(specs)


def test_the_guide_creates_the_secret_the_pods_read(manifests: list[mc.Manifest]) -> None:
    (secret,) = mc.of_kind(manifests, "Secret")
    (key,) = secret.doc["stringData"]
    text = DOCS.read_text()
    assert re.search(rf"create secret generic {secret.name}\b", text)
    assert f"--from-literal={key}=" in text
    assert mc.SECRET_TEMPLATE in text


# --- each check, shown to fail --------------------------------------------------------
def _container(ms: list[mc.Manifest], kind: str, name: str) -> dict[str, Any]:
    return mc.one(ms, kind, name).doc["spec"]["template"]["spec"]["containers"][0]


def _settings(ms: list[mc.Manifest]) -> dict[str, str]:
    return mc.one(ms, "ConfigMap", "zerohop-settings").doc["data"]


def _env(c: dict[str, Any], name: str) -> dict[str, Any]:
    (item,) = [e for e in c["env"] if e["name"] == name]
    return item


def _rename_setting(ms: list[mc.Manifest], old: str, new: str) -> None:
    data = _settings(ms)
    data[new] = data.pop(old)


def _master_service_port(ms: list[mc.Manifest], port: int) -> None:
    mc.one(ms, "Service", "zerohop-master").doc["spec"]["ports"][0]["port"] = port


def _master_host(ms: list[mc.Manifest], host: str) -> None:
    args = _container(ms, "Deployment", "zerohop-worker")["args"]
    args[args.index("--master-host") + 1] = host


def _no_tmp(ms: list[mc.Manifest]) -> None:
    c = _container(ms, "Deployment", "zerohop-worker")
    c["volumeMounts"] = [vm for vm in c["volumeMounts"] if vm["mountPath"] != "/tmp"]


def _workloads_elsewhere(ms: list[mc.Manifest]) -> None:
    c = _container(ms, "Deployment", "zerohop-worker")
    for vm in c["volumeMounts"]:
        if vm["name"] == "workloads":
            vm["mountPath"] = "/workloads"


MUTATIONS: dict[str, tuple[Callable[[list[mc.Manifest]], None], str]] = {
    "key inlined in the settings ConfigMap": (
        lambda ms: _settings(ms).update(ZEROHOP_API_KEY=LEAKED_KEY),
        "ConfigMap zerohop-settings: key ZEROHOP_API_KEY looks like a secret"),
    "key-like value under an innocent name": (
        lambda ms: _settings(ms).update(ZEROHOP_MODEL=LEAKED_KEY),
        "ZEROHOP_MODEL holds what looks like an API key"),
    "the Secret's value copied into a ConfigMap": (
        lambda ms: _settings(ms).update(
            ZEROHOP_MODEL=mc.one(ms, "Secret", "zerohop-api-key").doc["stringData"]["api-key"]),
        "ZEROHOP_MODEL holds the value of a Secret"),
    "key as a plain env value on the workers": (
        lambda ms: _env(_container(ms, "Deployment", "zerohop-worker"),
                        "ZEROHOP_API_KEY").update(value=LEAKED_KEY, valueFrom=None),
        "env ZEROHOP_API_KEY holds a secret value"),
    "key env from a ConfigMap instead of the Secret": (
        lambda ms: _env(_container(ms, "Job", "zerohop-master"), "ZEROHOP_API_KEY").update(
            valueFrom={"configMapKeyRef": {"name": "zerohop-settings", "key": "ZEROHOP_API"}}),
        "env ZEROHOP_API_KEY is not from a secretKeyRef"),
    "key ref to a key the Secret lacks": (
        lambda ms: _env(_container(ms, "Deployment", "zerohop-sim"), "ZEROHOP_SIM_API_KEY")
        ["valueFrom"]["secretKeyRef"].update(key="token"),
        "which the Secret template does not have"),
    "key on the sim's command line": (
        lambda ms: _container(ms, "Deployment", "zerohop-sim")["command"].extend(
            ["--api-key", LEAKED_KEY]),
        "an API key on the command line"),
    "a container without resource requests": (
        lambda ms: _container(ms, "Deployment", "zerohop-worker")["resources"].pop("requests"),
        "container worker: no resource requests"),
    "a container without a memory limit": (
        lambda ms: _container(ms, "Job", "zerohop-master")["resources"]["limits"].pop("memory"),
        "container master: no memory limit"),
    "the workers pointed at a wrong host": (
        lambda ms: _master_host(ms, "zerohop-mastr"),
        "master host zerohop-mastr is not a Service selecting the master"),
    "the master Service on another port": (
        lambda ms: _master_service_port(ms, 5558),
        "--master-port 5557 is not a port of master-service.yaml"),
    "the master binding another port": (
        lambda ms: _container(ms, "Job", "zerohop-master")["args"].__setitem__(
            0, _container(ms, "Job", "zerohop-master")["args"][0].replace(
                "--master-bind-port 5557", "--master-bind-port 6000")),
        "not the master's --master-bind-port 6000"),
    "a Service selecting no pod": (
        lambda ms: mc.one(ms, "Service", "zerohop-results").doc["spec"]["selector"].update(
            {"app.kubernetes.io/component": "result"}),
        "Service zerohop-results: selects no pod"),
    "more workers than the master waits for": (
        lambda ms: mc.one(ms, "Deployment", "zerohop-worker").doc["spec"].update(replicas=3),
        "3 replicas, but the master expects ZEROHOP_WORKERS=2"),
    "a setting the master's script reads gone": (
        lambda ms: _rename_setting(ms, "ZEROHOP_DURATION", "ZEROHOP_RUN_TIME"),
        "master script reads $ZEROHOP_DURATION"),
    "the workers' workloads at another path": (
        _workloads_elsewhere, "worker: the workloads are not mounted at /etc/zerohop/workloads"),
    "a writable root filesystem": (
        lambda ms: _container(ms, "Job", "zerohop-master")["securityContext"].update(
            readOnlyRootFilesystem=False),
        "container master: readOnlyRootFilesystem is not true"),
    "a pod running as root": (
        lambda ms: mc.one(ms, "Deployment", "zerohop-sim").doc["spec"]["template"]["spec"]
        ["securityContext"].update(runAsNonRoot=False, runAsUser=0),
        "pod not runAsNonRoot"),
    "no emptyDir for /tmp": (_no_tmp, "container worker: /tmp is not an emptyDir"),
    "another image": (
        lambda ms: _container(ms, "Deployment", "zerohop-results").update(image="python:3.11"),
        "image python:3.11 is not zerohop:latest"),
    "a volume naming a missing ConfigMap": (
        lambda ms: mc.one(ms, "Job", "zerohop-master").doc["spec"]["template"]["spec"]
        ["volumes"][1]["configMap"].update(name="zerohop-workload"),
        "names a missing ConfigMap zerohop-workload"),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_each_check_fails_on_a_broken_manifest(manifests: list[mc.Manifest], uid: int,
                                               mutation: str) -> None:
    mutate, expected = MUTATIONS[mutation]
    broken = copy.deepcopy(manifests)
    mutate(broken)
    problems = mc.all_problems(broken, uid)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("field, value, expected", [
    ("replicas", "two", "spec.replicas: 'two' is not of type 'integer'"),
    ("replica", 2, "spec: Additional properties are not allowed ('replica' was unexpected)"),
])
def test_the_schema_check_fails_on_a_broken_manifest(manifests: list[mc.Manifest], field: str,
                                                     value: Any, expected: str) -> None:
    broken = copy.deepcopy(manifests)
    mc.one(broken, "Deployment", "zerohop-worker").doc["spec"][field] = value
    problems = mc.schema_problems(broken, VERSIONS[0])
    assert len(problems) == 1 and expected in problems[0], problems


@pytest.mark.parametrize("change, expected", [
    (lambda k: k["resources"].append(mc.SECRET_TEMPLATE), "its placeholder would replace"),
    (lambda k: k["resources"].remove("workers.yaml"), "leaves out workers.yaml"),
    (lambda k: k["resources"].append("ingress.yaml"), "lists ingress.yaml, which does not"),
])
def test_the_kustomization_check_fails_on_a_broken_list(
        change: Callable[[dict[str, Any]], None], expected: str) -> None:
    kustomization = copy.deepcopy(mc.load_kustomization())
    change(kustomization)
    problems = mc.kustomization_problems(kustomization)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("line, baked", [
    ("ENV HOME=/tmp", "ENV OPENAI_API_KEY=sk-abc"),
    ("PIP_NO_CACHE_DIR=1", "PIP_NO_CACHE_DIR=1 ZEROHOP_API_KEY=abc"),  # a continued ENV
])
def test_the_dockerfile_check_fails_on_a_baked_in_key(line: str, baked: str) -> None:
    text = DOCKERFILE.read_text()
    assert line in text
    problems = mc.dockerfile_problems(text.replace(line, baked))
    assert any("looks like a secret" in p for p in problems), problems
