#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Kubernetes manifests of deploy/kubernetes/ (deploy/README.md), checked as far as they can
# be without a cluster. kubectl's client dry run needs an API server's discovery even so: a
# stub here, on 127.0.0.1 only, answers it (the kinds below) and 404s every object, and
# refuses any write. Then:
#   1. each file: `kubectl apply --dry-run=client --validate=false -f FILE` exits 0 and prints
#      "KIND[.GROUP]/NAME created (dry run)" for each of its documents and nothing more (the
#      expected lines come from the file itself: a document's top-level apiVersion and kind,
#      and the first "  name:" under metadata);
#   2. the objects as kubectl parsed them (-o json), checked against each other: one
#      namespace for all; selectors that match a workload; every ConfigMap, Secret, key,
#      volume and port a pod names exists; every $(VAR) and, in a shell script, every
#      $UPPER_CASE a container uses is in its env; every file a command names under a
#      ConfigMap's or Secret's mount is one of its keys; a StatefulSet's service headless; a
#      nats:// list naming a StatefulSet's pods names all of them; an Ingress's Services,
#      ports and certificates exist, and a PUBLIC_URL is one of its hosts;
#   3. a nats-server config in a ConfigMap passes `nats-server -t` (Debian's), with the env
#      its container has (where nats-server is installed).
# What it cannot check: the fields themselves (--validate=false: no schema without a
# server), admission, scheduling, the device plugins, the image.
#
#   k8s.sh [DIR]        DIR: the manifests (default: deploy/kubernetes of this tree)
#
# $KUBECTL: the kubectl to run (default: kubectl on PATH; Debian 12's kubernetes-client 1.20
# and the Cloud SDK's 1.32 both pass). Exit status 0: all passed; 1: a check failed; 77:
# skipped (no kubectl or python3).
set -u
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here/../../deploy/kubernetes}
kubectl=${KUBECTL:-kubectl}

command -v "$kubectl" >/dev/null 2>&1 || {
	echo "SKIP: no kubectl (Debian's kubernetes-client, or set KUBECTL)"
	exit 77
}
command -v python3 >/dev/null 2>&1 || {
	echo "SKIP: no python3"
	exit 77
}
[ -d "$dir" ] || {
	echo "k8s.sh: $dir: no such directory" >&2
	exit 1
}

work=$(mktemp -d) || exit 1
stub_pid=
cleanup() {
	if [ -n "$stub_pid" ]; then
		kill "$stub_pid" 2>/dev/null
		wait "$stub_pid" 2>/dev/null
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP PIPE

# The discovery kubectl asks for (seen with -v=8): 1.32 first GET /version (its dispatcher
# picks a kubectl by the server's version), 1.20 first GET /openapi/v2 and
# /swagger-2.0.0.pb-v1 (a 404 is fine with --validate=false); both then GET /api, /apis, and
# /api/v1 and /apis/GROUP/VERSION for each group, then each object by its path (and its
# namespace's) to decide create or patch: a 404 makes it a create. 1.32 asks /api and /apis
# for aggregated discovery first and takes the plain lists.
cat >"$work/stub.py" <<'EOF'
import http.server
import json
import os
import sys
import threading
import time

# The kinds the manifests may use: a new kind is added here on purpose.
RESOURCES = {
    "v1": [("namespaces", "Namespace", False), ("configmaps", "ConfigMap", True),
           ("secrets", "Secret", True), ("services", "Service", True),
           ("serviceaccounts", "ServiceAccount", True)],
    "apps/v1": [("daemonsets", "DaemonSet", True), ("statefulsets", "StatefulSet", True)],
    "policy/v1": [("poddisruptionbudgets", "PodDisruptionBudget", True)],
    "networking.k8s.io/v1": [("ingresses", "Ingress", True)],
}
GROUPS = sorted({gv.split("/")[0] for gv in RESOURCES if "/" in gv})


def resource_list(gv):
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": [{"name": n, "singularName": k.lower(), "namespaced": ns, "kind": k,
                           "verbs": ["create", "delete", "get", "list", "patch", "update"]}
                          for n, k, ns in RESOURCES[gv]]}


def group(name):
    gvs = [{"groupVersion": gv, "version": gv.split("/")[1]}
           for gv in RESOURCES if gv.startswith(name + "/")]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def answer(path):
    if path == "/version":
        return {"major": "1", "minor": "21", "gitVersion": "v1.21.0", "platform": "linux/amd64"}
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group(g) for g in GROUPS]}
    if path == "/api/v1":
        return resource_list("v1")
    if path.startswith("/apis/") and path[6:] in RESOURCES:
        return resource_list(path[6:])
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?")[0]
        log.write("GET %s\n" % path)
        body = answer(path)
        if body is not None:
            self.reply(200, body)
        else:
            self.reply(404, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                             "status": "Failure", "reason": "NotFound", "code": 404,
                             "message": "the stub holds no objects"})

    def refuse(self):
        log.write("WRITE %s %s\n" % (self.command, self.path.split("?")[0]))
        self.reply(405, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                         "status": "Failure", "reason": "MethodNotAllowed", "code": 405})

    do_POST = do_PUT = do_PATCH = do_DELETE = refuse

    def log_message(self, *args):
        pass


def orphaned(parent):
    # the script killed before it could stop us: stop anyway, within a second
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(0)


log = open(sys.argv[2], "a", buffering=1)
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
threading.Thread(target=orphaned, args=(os.getppid(),), daemon=True).start()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % server.server_address[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
server.serve_forever()
EOF

python3 "$work/stub.py" "$work/port" "$work/requests.log" 2>"$work/stub.err" &
stub_pid=$!
i=0
while [ ! -s "$work/port" ] && [ "$i" -lt 100 ]; do
	kill -0 "$stub_pid" 2>/dev/null || break
	sleep 0.1
	i=$((i + 1))
done
[ -s "$work/port" ] || {
	echo "k8s.sh: the API stub did not start:" >&2
	cat "$work/stub.err" >&2
	exit 1
}
port=$(cat "$work/port")
cat >"$work/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: stub
  cluster:
    server: http://127.0.0.1:$port
users:
- name: stub
  user: {}
contexts:
- name: stub
  context:
    cluster: stub
    user: stub
    namespace: default
current-context: stub
EOF

# kubectl with nothing of this machine's: its own HOME and discovery cache, this kubeconfig
# only, and no proxy (Go would not proxy loopback anyway).
kc() {
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy -u ALL_PROXY -u all_proxy \
		NO_PROXY=127.0.0.1 HOME="$work" KUBECONFIG="$work/kubeconfig" \
		"$kubectl" --cache-dir="$work/cache" --request-timeout=20s "$@"
}

passed=0 failed=0
pass() {
	echo "ok: $*"
	passed=$((passed + 1))
}
fail() {
	echo "FAIL: $*"
	failed=$((failed + 1))
}

echo "kubectl: $(kc version --client 2>/dev/null | head -n 1)"
nfiles=0
for f in "$dir"/*.yaml; do
	[ -f "$f" ] || continue
	nfiles=$((nfiles + 1))
	name=${f##*/}
	# What kubectl must print: one line per document, from the file's own text.
	awk '
		function emit() {
			if (kind == "") return
			g = api; sub(/\/?[^\/]*$/, "", g)
			printf "%s%s/%s created (dry run)\n", tolower(kind), (g == "" ? "" : "." g), nm
		}
		/^---/ { emit(); kind = api = nm = ""; inmeta = 0; next }
		/^apiVersion:/ { api = $2 }
		/^kind:/ { kind = $2 }
		/^metadata:/ { inmeta = 1; next }
		/^[^ #]/ { inmeta = 0 }
		inmeta && nm == "" && /^  name:/ { nm = $2 }
		END { emit() }
	' "$f" | tr -d "\"'" | sort >"$work/want"
	if kc apply --dry-run=client --validate=false -f "$f" >"$work/out" 2>"$work/err"; then
		rc=0
	else
		rc=$?
	fi
	sort "$work/out" >"$work/got"
	if [ "$rc" -ne 0 ]; then
		fail "$name: kubectl exited $rc: $(head -c 600 "$work/err")"
	elif [ ! -s "$work/want" ]; then
		fail "$name: no document with a kind"
	elif ! cmp -s "$work/want" "$work/got"; then
		fail "$name: kubectl's lines differ from the file's documents (< wanted, > printed):"
		diff "$work/want" "$work/got" | grep '^[<>]'
	else
		pass "$name: created (dry run): $(cut -d' ' -f1 "$work/got" | tr '\n' ' ')"
	fi
done
[ "$nfiles" -gt 0 ] || fail "no *.yaml in $dir"

# The objects as kubectl parsed them, checked against each other.
if kc apply --dry-run=client --validate=false -o json -f "$dir" >"$work/all.json" 2>"$work/err"; then
	cat >"$work/check.py" <<'EOF'
import json
import os
import re
import shutil
import subprocess
import sys

work = sys.argv[1]
doc = json.load(open(os.path.join(work, "all.json")))
objs = doc["items"] if doc.get("kind") == "List" else [doc]
problems = []


def bad(obj, what):
    problems.append("%s/%s: %s" % (obj["kind"], obj["metadata"].get("name"), what))


def find(kind, name, ns):
    for o in objs:
        if o["kind"] == kind and o["metadata"].get("name") == name and \
                o["metadata"].get("namespace") == ns:
            return o
    return None


def keys(o):
    return set((o.get("data") or {}).keys()) | set((o.get("stringData") or {}).keys())


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


nss = [o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"]
if len(nss) != 1:
    problems.append("want one Namespace, have %s" % nss)
seen = set()
for o in objs:
    ident = (o["kind"], o["metadata"].get("namespace"), o["metadata"].get("name"))
    if ident in seen:
        bad(o, "defined twice")
    seen.add(ident)
    if o["kind"] != "Namespace" and nss and o["metadata"].get("namespace") != nss[0]:
        bad(o, "namespace %r, not %r" % (o["metadata"].get("namespace"), nss[0]))

workloads = [o for o in objs if o["kind"] in ("DaemonSet", "StatefulSet", "Deployment")]
nats_checks = []
nats_confs = []
for w in workloads:
    ns = w["metadata"].get("namespace")
    tmpl = w["spec"]["template"]
    labels = tmpl["metadata"].get("labels") or {}
    if not matches(w["spec"]["selector"].get("matchLabels"), labels):
        bad(w, "selector does not match its pods' labels")
    pod = tmpl["spec"]
    vols = {v["name"]: v for v in pod.get("volumes") or []}
    claims = {c["metadata"]["name"] for c in w["spec"].get("volumeClaimTemplates") or []}
    for v in vols.values():
        for kind, ref, name_key in (("ConfigMap", "configMap", "name"),
                                    ("Secret", "secret", "secretName")):
            if ref in v:
                o = find(kind, v[ref][name_key], ns)
                if not o:
                    bad(w, "volume %s: no %s %s" % (v["name"], kind, v[ref][name_key]))
                for it in v[ref].get("items") or []:
                    if o and it["key"] not in keys(o):
                        bad(w, "volume %s: %s has no key %s" % (v["name"], kind, it["key"]))
    if w["kind"] == "StatefulSet":
        svc = find("Service", w["spec"].get("serviceName"), ns)
        if not svc or svc["spec"].get("clusterIP") != "None":
            bad(w, "serviceName %r is not a headless Service" % w["spec"].get("serviceName"))
        else:
            members = {"%s-%d.%s.%s.svc" % (w["metadata"]["name"], i, svc["metadata"]["name"],
                                            ns) for i in range(w["spec"].get("replicas", 1))}
            pat = re.compile(r"nats://(%s-\d+\.%s\.%s\.svc)(?::\d+)?" % (
                re.escape(w["metadata"]["name"]), re.escape(svc["metadata"]["name"]),
                re.escape(ns)))
            nats_checks.append((w, members, pat))
    for c in (pod.get("initContainers") or []) + pod["containers"]:
        where = "container %s" % c["name"]
        defined = set()
        for e in c.get("env") or []:
            defined.add(e["name"])
            vf = e.get("valueFrom") or {}
            for kind, ref in (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef")):
                if ref in vf:
                    o = find(kind, vf[ref]["name"], ns)
                    if not o or vf[ref]["key"] not in keys(o):
                        bad(w, "%s: env %s: no %s %s with key %s" % (
                            where, e["name"], kind, vf[ref]["name"], vf[ref]["key"]))
        for ef in c.get("envFrom") or []:
            for kind, ref in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
                if ref in ef:
                    o = find(kind, ef[ref]["name"], ns)
                    if not o:
                        bad(w, "%s: envFrom: no %s %s" % (where, kind, ef[ref]["name"]))
                    else:
                        defined |= keys(o)
        words = (c.get("command") or []) + (c.get("args") or [])
        texts = words + [e.get("value", "") for e in c.get("env") or []]
        # Kubernetes leaves an undefined $(VAR) as it is, silently.
        for t in texts:
            for v in re.findall(r"(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)", t):
                if v not in defined:
                    bad(w, "%s: $(%s) is not in its env" % (where, v))
        # A shell script's $UPPER_CASE is the container's env: a typo is an empty argument.
        if words and re.search(r"(^|/)(ba)?sh$", words[0]):
            for t in words[1:]:
                for v in re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", t):
                    if v not in defined:
                        bad(w, "%s: the script's $%s is not in its env" % (where, v))
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports") or []}
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            p = c.get(probe)
            for how in ("httpGet", "tcpSocket"):
                port = ((p or {}).get(how) or {}).get("port")
                if port is not None and port not in ports and port not in ports.values():
                    bad(w, "%s: %s port %r is not a port of it" % (where, probe, port))
        for m in c.get("volumeMounts") or []:
            if m["name"] not in vols and m["name"] not in claims:
                bad(w, "%s: mount %s: no such volume" % (where, m["name"]))
                continue
            v = vols.get(m["name"], {})
            src = None
            if "configMap" in v:
                src = find("ConfigMap", v["configMap"]["name"], ns)
            elif "secret" in v:
                src = find("Secret", v["secret"]["secretName"], ns)
            if not src:
                continue
            base = m["mountPath"].rstrip("/") + "/"
            for t in words:
                for path in re.findall(re.escape(base) + r"[^\s\"';]+", t):
                    if path[len(base):] not in keys(src):
                        bad(w, "%s: %s is not a key of %s %s" % (
                            where, path, src["kind"], src["metadata"]["name"]))
            if src["kind"] == "ConfigMap" and words and words[0].endswith("nats-server"):
                for i, t in enumerate(words[:-1]):
                    if t in ("-c", "--config") and words[i + 1].startswith(base):
                        # a fieldRef's value is a stand-in: only the name must exist
                        env = {e["name"]: e.get("value", "x-" + e["name"].lower())
                               for e in c.get("env") or []}
                        nats_confs.append((w, src["data"][words[i + 1][len(base):]], env))

for o in objs:
    sel = None
    if o["kind"] == "Service":
        sel = o["spec"].get("selector")
    elif o["kind"] == "PodDisruptionBudget":
        sel = o["spec"]["selector"].get("matchLabels")
    else:
        continue
    ws = [w for w in workloads if w["metadata"].get("namespace") == o["metadata"].get("namespace")
          and matches(sel, w["spec"]["template"]["metadata"].get("labels") or {})]
    if not ws:
        bad(o, "selector %s matches no workload" % sel)
    for w in ws if o["kind"] == "Service" else []:
        cports = [p for c in w["spec"]["template"]["spec"]["containers"]
                  for p in c.get("ports") or []]
        for sp in o["spec"]["ports"]:
            tp = sp.get("targetPort", sp["port"])
            if not any(tp in (p.get("name"), p["containerPort"]) for p in cports):
                bad(o, "targetPort %r is no port of %s" % (tp, w["metadata"]["name"]))

# An Ingress's Services, ports and certificates exist; a PUBLIC_URL is one of its hosts (the
# name dataplane_url and links start with must be one the Ingress serves).
ingress_hosts = set()
for o in objs:
    if o["kind"] != "Ingress":
        continue
    ns = o["metadata"].get("namespace")
    for t in o["spec"].get("tls") or []:
        if not find("Secret", t.get("secretName"), ns):
            bad(o, "tls: no Secret %s" % t.get("secretName"))
    for rule in o["spec"].get("rules") or []:
        ingress_hosts.add(rule.get("host"))
        for path in (rule.get("http") or {}).get("paths") or []:
            b = path["backend"]["service"]
            svc = find("Service", b["name"], ns)
            port = b["port"].get("name", b["port"].get("number"))
            if not svc:
                bad(o, "backend: no Service %s" % b["name"])
            elif not any(port in (p.get("name"), p["port"]) for p in svc["spec"]["ports"]):
                bad(o, "backend: Service %s has no port %r" % (b["name"], port))
for o in objs:
    url = (o.get("data") or {}).get("PUBLIC_URL") if o["kind"] == "ConfigMap" else None
    m = re.match(r"https?://([^/:]+)", url or "")
    if m and ingress_hosts and m.group(1) not in ingress_hosts:
        bad(o, "PUBLIC_URL's host %s is not an Ingress host %s" % (m.group(1),
                                                                     sorted(ingress_hosts)))

for w, members, pat in nats_checks:
    for o in objs:
        if o["kind"] != "ConfigMap":
            continue
        for k, v in (o.get("data") or {}).items():
            named = set(pat.findall(v))
            if named and named != members:
                bad(o, "%s names %s of %s's pods, not %s" % (
                    k, sorted(named), w["metadata"]["name"], sorted(members)))

for p in problems:
    print("FAIL: " + p)
if not problems:
    print("ok: %d objects agree with each other (namespace, selectors, references, env, ports,"
          " mounts, NATS members, Ingress)" % len(objs))

# A nats-server config as its ConfigMap carries it, with its container's env.
for w, text, env in nats_confs:
    name = w["metadata"]["name"]
    server = shutil.which("nats-server") or shutil.which("nats-server", path="/usr/sbin")
    if not server:
        print("note: no nats-server here: %s's config is not parsed" % name)
        continue
    version = subprocess.run([server, "--version"], capture_output=True,
                             text=True).stdout.strip()
    path = os.path.join(work, "nats-%s.conf" % name)
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([server, "-t", "-c", path], env=env, capture_output=True,
                       text=True)
    if r.returncode == 0:
        print("ok: nats-server -t: %s's config is valid (%s)" % (name, version))
    else:
        print("FAIL: nats-server -t: %s's config: %s" % (name, (r.stderr + r.stdout).strip()))
EOF
	python3 "$work/check.py" "$work" >"$work/results" 2>&1
	st=$?
	while IFS= read -r line; do
		case $line in
		"ok: "*) pass "${line#ok: }" ;;
		"FAIL: "*) fail "${line#FAIL: }" ;;
		*) echo "$line" ;;
		esac
	done <"$work/results"
	[ "$st" -eq 0 ] || fail "the cross-checks exited $st"
else
	fail "kubectl -o json: $(head -c 600 "$work/err")"
fi

# Only reads reached the stub.
if grep -q '^WRITE' "$work/requests.log"; then
	fail "kubectl wrote to the API: $(grep '^WRITE' "$work/requests.log" | sort -u | tr '\n' ' ')"
else
	pass "kubectl only read: $(sort -u "$work/requests.log" | awk '{print $2}' | tr '\n' ' ')"
fi

echo "k8s: $passed checks passed, $failed failed"
[ "$failed" -eq 0 ]
