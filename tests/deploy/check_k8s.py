#!/usr/bin/env python3
"""Checks the manifests `kiln deploy k8s` wrote into DIR (tests/cli/deploy_k8s_test.cc runs it).

Parses them with PyYAML (a parser other than the writer's), checks kiln's own conventions, then
runs `kubernetes-validate --strict` against the Kubernetes version it carries schemas for.
Usage: check_k8s.py DIR PRODUCT=COUNT [PRODUCT=COUNT...]. Exit 0: all good; 1: a problem (each
printed); 2: a tool is missing (scripts/bootstrap installs it).
"""
import glob
import os
import re
import subprocess
import sys

try:
    import yaml
except ImportError:
    print("check_k8s: PyYAML is missing: run scripts/bootstrap (it installs kubernetes-validate)")
    sys.exit(2)

problems = []


def problem(text):
    problems.append(text)


def pinned(image):
    if "@sha256:" in image:
        return True
    name = image.rsplit("/", 1)[-1]
    return ":" in name and not name.endswith(":latest")


def pod_spec(doc):
    kind = doc.get("kind")
    if kind in ("Job", "StatefulSet", "Deployment"):
        return doc["spec"]["template"]["spec"]
    return None


def main():
    folder = sys.argv[1]
    gpus = dict((p.split("=")[0], int(p.split("=")[1])) for p in sys.argv[2:])
    files = sorted(glob.glob(os.path.join(folder, "*.yaml")))
    if not files:
        print("check_k8s: no manifests in " + folder)
        return 1
    docs = []
    for f in files:
        with open(f) as stream:
            docs += [d for d in yaml.safe_load_all(stream) if d is not None]
    with open(os.path.join(folder, "secrets.sh")) as stream:
        secrets_made = set(re.findall(r"create secret generic (\S+)", stream.read()))

    evaluator_jobs = {}
    for doc in docs:
        where = "%s/%s" % (doc.get("kind"), doc.get("metadata", {}).get("name"))
        if doc.get("kind") == "Secret":
            problem(where + ": a Secret written into the manifests (secrets.sh makes them)")
        spec = pod_spec(doc)
        if spec is None:
            continue
        component = doc["metadata"]["labels"].get("app.kubernetes.io/component")
        if not spec.get("securityContext", {}).get("runAsNonRoot"):
            problem(where + ": the pod may run as root")
        for c in spec.get("initContainers", []) + spec["containers"]:
            if not pinned(c["image"]):
                problem(where + ": image %s is not pinned" % c["image"])
            for env in c.get("env", []):
                if re.search("PASSWORD|SECRET|KEY", env["name"]) and "value" in env:
                    problem(where + ": %s is written into the manifest" % env["name"])
        for c in spec["containers"]:
            if "livenessProbe" not in c:
                problem(where + ": container %s has no liveness probe" % c["name"])
            if c.get("ports") and "readinessProbe" not in c:
                problem(where + ": container %s serves a port with no readiness probe" % c["name"])
        for v in spec.get("volumes", []):
            name = v.get("secret", {}).get("secretName")
            if name and name not in secrets_made:
                problem(where + ": Secret %s is named but secrets.sh does not make it" % name)
        if component == "coordinator":
            # Its own probes (docs/observe.md): the search loop alive, the run searching, on the
            # port its --http serves.
            c = spec["containers"][0]
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            args = c.get("args", [])
            http = args[args.index("--http") + 1] if "--http" in args else ""
            if c.get("livenessProbe", {}).get("httpGet", {}).get("path") != "/healthz" or \
               c.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/readyz":
                problem(where + ": the coordinator's probes are not its /healthz and /readyz")
            if not http.startswith("0.0.0.0:") or str(ports.get("http")) != http.split(":")[1]:
                problem(where + ": --http %r does not serve the container's http port %s" % (http, ports.get("http")))
        if component in ("evaluator", "sweep"):
            for c in spec["containers"]:
                if c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu") != 1:
                    problem(where + ": an evaluator container without a limit of one GPU")
            product = spec.get("nodeSelector", {}).get("nvidia.com/gpu.product")
            if not product:
                problem(where + ": no node selector by GPU product")
            if component == "evaluator":
                evaluator_jobs[product] = doc["spec"].get("completions")
    if evaluator_jobs != gpus:
        problem("evaluator Jobs per GPU product %s, expected %s" % (evaluator_jobs, gpus))

    try:
        import kubernetes_validate  # noqa: F401  (only to say what is missing)
    except ImportError:
        print("check_k8s: kubernetes-validate is missing: run scripts/bootstrap")
        return 2
    run = subprocess.run([sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet"] + files,
                         capture_output=True, text=True)
    if run.returncode != 0:
        problem("kubernetes-validate --strict: " + (run.stdout + run.stderr).strip())
    for p in problems:
        print("check_k8s: " + p)
    print("check_k8s: %d document(s) in %d file(s), %d problem(s)" % (len(docs), len(files), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
