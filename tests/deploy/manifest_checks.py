"""What a reviewer checks in deploy/'s Kubernetes manifests, as functions that list the
problems they find (an empty list: none). test_manifests.py runs them on the shipped
files, and on copies broken on purpose, to show each check can fail.

The manifests are read as plain dicts; nothing here talks to a cluster.
"""

from __future__ import annotations

import base64
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from zerohop.core.redaction import is_secret_key, redact, secret_env_names

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SECRET_TEMPLATE = "secret.template.yaml"
KUSTOMIZATION = "kustomization.yaml"
IMAGE = "zerohop:latest"
# the variables an API key is read from: zerohop's client and the embedded target's.
# What else is a secret is zerohop's one rule (core.redaction): a name by its words,
# a value by its shape.
API_KEY_VARIABLES = frozenset({*secret_env_names(), "ZEROHOP_SIM_API_KEY"})
POD_OWNERS = {"Deployment", "Job", "StatefulSet", "DaemonSet", "ReplicaSet"}
# variables the master's script sets itself (everything else must come from its env)
SCRIPT_LOCALS = frozenset({"run_dir", "name", "locust", "code", "stopped"})


@dataclass(frozen=True)
class Manifest:
    """One document of one file in deploy/."""

    file: str
    doc: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.doc.get("kind"))

    @property
    def name(self) -> str:
        return str(self.doc.get("metadata", {}).get("name"))

    def __str__(self) -> str:
        return f"{self.file}: {self.kind} {self.name}"


def load_manifests(folder: Path = DEPLOY) -> list[Manifest]:
    """Every Kubernetes object in the folder's YAML files (the Kustomization aside)."""
    found = []
    for path in sorted(folder.glob("*.yaml")):
        if path.name == KUSTOMIZATION:
            continue
        found += [Manifest(path.name, doc) for doc in yaml.safe_load_all(path.read_text())
                  if doc]
    return found


def load_kustomization(folder: Path = DEPLOY) -> dict[str, Any]:
    return yaml.safe_load((folder / KUSTOMIZATION).read_text())


# --- finding things -------------------------------------------------------------------
def of_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m.kind == kind]


def one(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    (found,) = [m for m in manifests if m.kind == kind and m.name == name]
    return found


def pod_templates(manifests: list[Manifest]) -> Iterator[tuple[Manifest, dict[str, Any]]]:
    """(owner, pod template) of every workload object."""
    for m in manifests:
        if m.kind in POD_OWNERS:
            yield m, m.doc["spec"]["template"]


def containers(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod_spec.get("initContainers", []), *pod_spec.get("containers", [])]


def command_text(container: dict[str, Any]) -> str:
    return " ".join([*container.get("command", []), *container.get("args", [])])


def role_template(manifests: list[Manifest], flag: str) -> tuple[Manifest, dict[str, Any],
                                                                  dict[str, Any]]:
    """The one (owner, pod template, container) whose command runs Locust with `flag`
    (--master or --worker)."""
    found = [(m, t, c) for m, t in pod_templates(manifests) for c in containers(t["spec"])
             if re.search(rf"{flag}(\s|$)", command_text(c))]
    assert len(found) == 1, f"expected one container running locust {flag}, got {found}"
    return found[0]


def config_maps(manifests: list[Manifest]) -> dict[str, dict[str, str]]:
    return {m.name: dict(m.doc.get("data") or {}) for m in of_kind(manifests, "ConfigMap")}


def secret_values(manifests: list[Manifest]) -> dict[str, dict[str, str]]:
    """{secret name: {key: value}} of the Secrets (templates included)."""
    found: dict[str, dict[str, str]] = {}
    for m in of_kind(manifests, "Secret"):
        values = dict(m.doc.get("stringData") or {})
        for key, encoded in (m.doc.get("data") or {}).items():
            values[key] = base64.b64decode(encoded).decode()
        found[m.name] = values
    return found


def container_env(manifests: list[Manifest], container: dict[str, Any]) -> dict[str, Any]:
    """{name: value or None (from a reference)} as the container sees its environment."""
    env: dict[str, Any] = {}
    maps = config_maps(manifests)
    for source in container.get("envFrom", []):
        ref = source.get("configMapRef")
        if ref:
            env.update(maps.get(ref["name"], {}))
    for item in container.get("env", []):
        env[item["name"]] = item.get("value")
    return env


def flag_value(text: str, flag: str) -> str | None:
    words = shlex.split(text)
    return words[words.index(flag) + 1] if flag in words else None


# --- the checks -----------------------------------------------------------------------
def schema_problems(manifests: list[Manifest], version: str) -> list[str]:
    """Each object against the Kubernetes API's own schema, strictly (no unknown field)."""
    import kubernetes_validate

    problems = []
    for m in manifests:
        try:
            kubernetes_validate.validate(m.doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path)
            problems.append(f"{m}: schema {version}: {where}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            problems.append(f"{m}: {exc.message}")
    return problems


def secret_problems(manifests: list[Manifest]) -> list[str]:
    """No key in a ConfigMap, a plain env value or a command line: API keys come from
    the Secret, through secretKeyRef, and nowhere else."""
    problems = []
    secrets = secret_values(manifests)
    values = {v for kv in secrets.values() for v in kv.values() if v}
    for name, data in config_maps(manifests).items():
        for key, value in data.items():
            if is_secret_key(key):
                problems.append(f"ConfigMap {name}: key {key} looks like a secret")
            if _looks_secret(value):
                problems.append(f"ConfigMap {name}: {key} holds what looks like an API key")
            if any(v in value for v in values):
                problems.append(f"ConfigMap {name}: {key} holds the value of a Secret")
    for owner, template in pod_templates(manifests):
        for c in containers(template["spec"]):
            where = f"{owner} container {c['name']}"
            text = command_text(c)
            if "--api-key" in text or any(v in text for v in values):
                problems.append(f"{where}: an API key on the command line (--api-key)")
            for item in c.get("env", []):
                problems += _env_secret_problems(where, item, secrets, values)
    return problems


def _env_secret_problems(where: str, item: dict[str, Any], secrets: dict[str, dict[str, str]],
                         values: set[str]) -> list[str]:
    name, value = item["name"], item.get("value")
    if value is not None and (any(v in value for v in values) or _looks_secret(value)):
        return [f"{where}: env {name} holds a secret value"]
    if name not in API_KEY_VARIABLES and not is_secret_key(name):
        return []
    ref = (item.get("valueFrom") or {}).get("secretKeyRef")
    if ref is None:
        return [f"{where}: env {name} is not from a secretKeyRef"]
    if ref["key"] not in secrets.get(ref["name"], {}):
        return [f"{where}: env {name} refers to {ref['name']}/{ref['key']}, which the "
                f"Secret template does not have"]
    return []


def _looks_secret(value: str) -> bool:
    return bool(redact(value) != value)


def resource_problems(manifests: list[Manifest]) -> list[str]:
    problems = []
    for owner, template in pod_templates(manifests):
        for c in containers(template["spec"]):
            resources = c.get("resources") or {}
            requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
            if not {"cpu", "memory"} <= requests.keys():
                problems.append(f"{owner} container {c['name']}: no resource requests "
                                f"for cpu and memory")
            if "memory" not in limits:
                problems.append(f"{owner} container {c['name']}: no memory limit")
    return problems


def security_problems(manifests: list[Manifest], uid: int) -> list[str]:
    """Non-root as the image's user, nothing gained, a read-only root with /tmp an
    emptyDir."""
    problems = []
    for owner, template in pod_templates(manifests):
        spec = template["spec"]
        pod = spec.get("securityContext") or {}
        if pod.get("runAsNonRoot") is not True or pod.get("runAsUser") != uid:
            problems.append(f"{owner}: pod not runAsNonRoot as uid {uid} (the image's user)")
        empty_dirs = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
        for c in containers(spec):
            sc = c.get("securityContext") or {}
            where = f"{owner} container {c['name']}"
            if sc.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{where}: readOnlyRootFilesystem is not true")
            if sc.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{where}: allowPrivilegeEscalation is not false")
            if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
                problems.append(f"{where}: capabilities not dropped")
            if not any(vm["mountPath"] == "/tmp" and vm["name"] in empty_dirs
                       for vm in c.get("volumeMounts", [])):
                problems.append(f"{where}: /tmp is not an emptyDir")
            if c.get("image") != IMAGE:
                problems.append(f"{where}: image {c.get('image')} is not {IMAGE}")
    return problems


def service_problems(manifests: list[Manifest]) -> list[str]:
    """Each Service selects pods, and each of its ports reaches a port they open."""
    problems = []
    for svc in of_kind(manifests, "Service"):
        selector = svc.doc["spec"].get("selector") or {}
        chosen = [t for _, t in pod_templates(manifests)
                  if selector and selector.items() <= (t["metadata"].get("labels") or {}).items()]
        if not chosen:
            problems.append(f"{svc}: selects no pod")
            continue
        opened = {p.get("name"): p["containerPort"] for t in chosen
                  for c in containers(t["spec"]) for p in c.get("ports", [])}
        for port in svc.doc["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            if target not in opened and target not in opened.values():
                problems.append(f"{svc}: port {port['port']} goes to {target}, which its pods "
                                f"do not open ({opened})")
    return problems


def master_worker_problems(manifests: list[Manifest]) -> list[str]:
    """The workers find the master: their --master-host is the Service in front of it,
    their --master-port that Service's port, which reaches the port it binds."""
    problems = []
    _, master_template, master = role_template(manifests, "--master")
    worker_owner, _, worker = role_template(manifests, "--worker")
    host = flag_value(command_text(worker), "--master-host")
    port = flag_value(command_text(worker), "--master-port")
    bound = re.search(r"--master-bind-port\s+(\d+)", command_text(master))
    bind_port = int(bound.group(1)) if bound else 5557  # Locust's default
    services = {s.name: s for s in of_kind(manifests, "Service")}
    svc = services.get(host or "")
    labels = master_template["metadata"].get("labels") or {}
    if svc is None or not (svc.doc["spec"].get("selector") or {}).items() <= labels.items():
        return [f"{worker_owner}: master host {host} is not a Service selecting the master"]
    by_port = {p["port"]: p.get("targetPort", p["port"]) for p in svc.doc["spec"]["ports"]}
    if port is None or int(port) not in by_port:
        problems.append(f"{worker_owner}: --master-port {port} is not a port of {svc}")
    else:
        target = by_port[int(port)]
        named = {p.get("name"): p["containerPort"] for p in master.get("ports", [])}
        if named.get(target, target) != bind_port:
            problems.append(f"{svc}: port {port} goes to {target}, not the master's "
                            f"--master-bind-port {bind_port}")
    expected = container_env(manifests, master).get("ZEROHOP_WORKERS")
    replicas = worker_owner.doc["spec"].get("replicas", 1)
    if expected is None or int(expected) != replicas:
        problems.append(f"{worker_owner}: {replicas} replicas, but the master expects "
                        f"ZEROHOP_WORKERS={expected}")
    return problems


def master_script_problems(manifests: list[Manifest]) -> list[str]:
    """Every variable the master's script reads is in its environment, and the paths
    it names are where the volumes are mounted (the workers' workloads at the same path:
    the master sends them its --workload paths)."""
    _, _, master = role_template(manifests, "--master")
    _, _, worker = role_template(manifests, "--worker")
    env = container_env(manifests, master)
    used = set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", command_text(master)))
    problems = [f"master script reads ${name}, which its environment does not set"
                for name in sorted(used - SCRIPT_LOCALS - env.keys())]
    mounts = {vm["mountPath"] for vm in master.get("volumeMounts", [])}
    for variable in ("ZEROHOP_RESULTS", "ZEROHOP_WORKLOADS_DIR"):
        if env.get(variable) not in mounts:
            problems.append(f"master: {variable}={env.get(variable)} is not a mount path")
    worker_mounts = {vm["mountPath"] for vm in worker.get("volumeMounts", [])}
    if env.get("ZEROHOP_WORKLOADS_DIR") not in worker_mounts:
        problems.append(f"worker: the workloads are not mounted at "
                        f"{env.get('ZEROHOP_WORKLOADS_DIR')}, where the master finds them")
    return problems


def reference_problems(manifests: list[Manifest]) -> list[str]:
    """Every ConfigMap, Secret and claim a pod names is one of the manifests."""
    names = {kind: {m.name for m in of_kind(manifests, kind)}
             for kind in ("ConfigMap", "Secret", "PersistentVolumeClaim")}
    problems = []
    for owner, template in pod_templates(manifests):
        for volume in template["spec"].get("volumes", []):
            for field, kind, key in (("configMap", "ConfigMap", "name"),
                                     ("secret", "Secret", "secretName"),
                                     ("persistentVolumeClaim", "PersistentVolumeClaim",
                                      "claimName")):
                if field in volume and volume[field][key] not in names[kind]:
                    problems.append(f"{owner}: volume {volume['name']} names a missing "
                                    f"{kind} {volume[field][key]}")
        for c in containers(template["spec"]):
            for source in c.get("envFrom", []):
                ref = source.get("configMapRef")
                if ref and ref["name"] not in names["ConfigMap"]:
                    problems.append(f"{owner}: envFrom names a missing ConfigMap {ref['name']}")
    return problems


def kustomization_problems(kustomization: dict[str, Any], folder: Path = DEPLOY) -> list[str]:
    """`kubectl apply -k` applies every manifest but the Secret template (which would
    overwrite the real key with its placeholder)."""
    listed = list(kustomization.get("resources", []))
    files = {p.name for p in folder.glob("*.yaml")} - {KUSTOMIZATION}
    problems = [f"kustomization lists {name}, which does not exist"
                for name in listed if name not in files]
    problems += [f"kustomization leaves out {name}"
                 for name in sorted(files - set(listed) - {SECRET_TEMPLATE})]
    if SECRET_TEMPLATE in listed:
        problems.append(f"kustomization applies {SECRET_TEMPLATE}: its placeholder would "
                        "replace the real key")
    return problems


def dockerfile_user(text: str) -> int:
    users = re.findall(r"^USER\s+(\d+)", text, re.MULTILINE)
    assert users, "the Dockerfile sets no numeric USER"
    return int(users[-1])


def dockerfile_problems(text: str) -> list[str]:
    """No key baked into the image (an ENV is in every layer's history)."""
    instructions = re.sub(r"\\\n", " ", text).splitlines()
    names = [word.split("=")[0] for line in instructions if line.startswith("ENV ")
             for word in shlex.split(line)[1:]]
    problems = [f"Dockerfile: ENV {name} looks like a secret"
                for name in names if is_secret_key(name) or name in API_KEY_VARIABLES]
    if not re.search(r"^RUN pip install /src\b", text, re.MULTILINE):
        problems.append("Dockerfile: does not pip-install the checkout")
    return problems


def all_problems(manifests: list[Manifest], uid: int) -> list[str]:
    """Every check but the schema (which is slower and run per version)."""
    return [*secret_problems(manifests), *resource_problems(manifests),
            *security_problems(manifests, uid), *service_problems(manifests),
            *master_worker_problems(manifests), *master_script_problems(manifests),
            *reference_problems(manifests)]
