#!/usr/bin/env bash
# The Helm chart deploy/helm/gpusched, checked with helm built from its Go module (helm.sh) and
# the real API server of the test plane:
#   1. `helm lint --strict` passes with the defaults and with the webhook, agent, leader
#      election, PriorityClasses and Queues turned off; the scheduler's values
#      (kaiPreemptibleThreshold, poolLabel, logFormat, policy, dynamicMig) reach its container's
#      args, which the gpusched binary takes, and bad values fail the render;
#   2. `helm template -n gpusched-system --include-crds` with the defaults renders exactly the
#      objects of the plain manifests in deploy/ (CRDs, RBAC, Deployment, PDB, webhook Service
#      and configuration, PriorityClasses, example Queues, agent RBAC, ConfigMap, DaemonSet,
#      Service), field for field, plus the webhook's Secret; the Secret's certificate verifies
#      against its CA for gpusched-webhook.gpusched-system.svc, and that CA is the caBundle;
#   3. the render for a namespace of this test is applied to the API server: the CRDs and the
#      namespace for real, everything else with a server-side dry run (schema validation,
#      strict fields, admission), so a chart the server would refuse fails here; and so does a
#      render with a bad value (failurePolicy Sometimes), to show this step can fail;
#   4. deploy/webhook-cert.sh --dry-run makes a Secret and configuration the server accepts.
#
# Usage: helm_chart.sh [GPUSCHED_BINARY]  (GPUSCHED_K8S_STATE names a plane that is up)
set -euo pipefail

bin=${1:-} # the gpusched binary, to check that it takes the args the chart renders
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
CHART=$SRC/deploy/helm/gpusched
# shellcheck disable=SC1090
source <(bash "$HERE/control-plane.sh" env)
helm=$(bash "$HERE/helm.sh" bin)
run=$$
ns=gs-helm-$run
tmp=$(mktemp -d)
export HELM_CACHE_HOME=$tmp/helm-cache HELM_CONFIG_HOME=$tmp/helm-config HELM_DATA_HOME=$tmp/helm-data

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
cleanup() {
    kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

echo "ok: $("$helm" version --short)"

# 1. Lint, defaults and the switches off.
"$helm" lint --strict "$CHART" >"$tmp/lint.log" 2>&1 || { cat "$tmp/lint.log" >&2; fail "helm lint"; }
"$helm" lint --strict "$CHART" --set webhook.enabled=false --set agent.enabled=false \
    --set scheduler.leaderElect=false --set scheduler.replicas=1 \
    --set priorityClasses.create=false --set 'queues=null' >"$tmp/lint2.log" 2>&1 ||
    { cat "$tmp/lint2.log" >&2; fail "helm lint with everything optional off"; }
echo "ok: helm lint --strict (defaults; webhook, agent, election, classes, queues off)"
# Accounting: one writer on a claim; two replicas or no claim are refused at render time.
"$helm" lint --strict "$CHART" --set scheduler.accounting.enabled=true --set scheduler.replicas=1 \
    --set scheduler.accounting.claimName=usage >"$tmp/lint3.log" 2>&1 ||
    { cat "$tmp/lint3.log" >&2; fail "helm lint with accounting on"; }
"$helm" template gpusched "$CHART" -n gpusched-system --set scheduler.accounting.enabled=true \
    --set scheduler.replicas=1 --set scheduler.accounting.claimName=usage >"$tmp/acct.yaml"
grep -q -- "- --accounting=/var/lib/gpusched/usage.db" "$tmp/acct.yaml" &&
    grep -q "claimName: usage" "$tmp/acct.yaml" || fail "accounting render lacks its flag or claim"
! "$helm" template gpusched "$CHART" --set scheduler.accounting.enabled=true \
    --set scheduler.accounting.claimName=usage >/dev/null 2>"$tmp/acct.err" &&
    grep -q "needs scheduler.replicas: 1" "$tmp/acct.err" || fail "accounting with 2 replicas was not refused"
echo "ok: accounting renders its flag and claim, and refuses two writers"
# The accountant: a one-replica StatefulSet with its volume beside 2 scheduler replicas that
# get no --accounting; refused together with the scheduler's own accounting.
"$helm" lint --strict "$CHART" --set accountant.enabled=true --set scheduler.replicas=2 \
    >"$tmp/lint4.log" 2>&1 || { cat "$tmp/lint4.log" >&2; fail "helm lint with the accountant"; }
"$helm" template gpusched "$CHART" -n gpusched-system --set accountant.enabled=true \
    --set scheduler.replicas=2 >"$tmp/accountant.yaml"
python3 - "$tmp/accountant.yaml" <<'PY' || fail "the accountant's render"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
sts = by[("StatefulSet", "gpusched-accountant")]
assert sts["spec"]["replicas"] == 1, sts["spec"]["replicas"]
c = sts["spec"]["template"]["spec"]["containers"][0]
assert c["args"][0] == "accountant" and "--accounting=/var/lib/gpusched/usage.db" in c["args"], c["args"]
assert sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "accounting"
dep = by[("Deployment", "gpusched-scheduler")]
assert dep["spec"]["replicas"] == 2
args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
assert not any(a.startswith("--accounting") for a in args), args
rules = by[("ClusterRole", "gpusched-accountant")]["rules"]
verbs = {v for r in rules for v in r["verbs"]}
assert verbs <= {"get", "list", "watch"}, verbs
print("ok: accountant StatefulSet (1 replica, its claim template), scheduler x2 without --accounting, read-only RBAC")
PY
"$helm" template gpusched "$CHART" -n gpusched-system --set accountant.enabled=true \
    --set accountant.claimName=usage >"$tmp/accountant2.yaml"
grep -q "claimName: usage" "$tmp/accountant2.yaml" && ! grep -q volumeClaimTemplates "$tmp/accountant2.yaml" ||
    fail "the accountant on an existing claim"
! "$helm" template gpusched "$CHART" --set accountant.enabled=true --set scheduler.replicas=1 \
    --set scheduler.accounting.enabled=true --set scheduler.accounting.claimName=usage \
    >/dev/null 2>"$tmp/acct2.err" && grep -q "choose one" "$tmp/acct2.err" ||
    fail "the accountant with the scheduler's own accounting was not refused"
echo "ok: accountant renders beside 2 replicas, on a claim of its own or yours, and refuses a second writer"

# The scheduler's values reach its container's args, in the template's order, and the gpusched
# binary of this build takes them all (the args then --help: an option it did not know, or a
# bad value, would exit 2 before --help is read). Refused values fail the render.
"$helm" template gpusched "$CHART" -n gpusched-system -s templates/scheduler.yaml \
    --set scheduler.kaiPreemptibleThreshold=100 --set scheduler.poolLabel=gpusched.io/pool \
    --set scheduler.logFormat=json --set scheduler.policy=bestfit \
    --set scheduler.dynamicMig.enabled=true --set scheduler.dynamicMig.planTimeoutSeconds=30 \
    >"$tmp/flags.yaml"
python3 - "$tmp/flags.yaml" >"$tmp/args" <<'PY' || fail "the scheduler's values do not reach its args"
import sys, yaml
dep = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "Deployment"][0]
args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
want = ["scheduler", "--policy=bestfit", "--kai-preemptible-threshold=100",
        "--pool-label=gpusched.io/pool", "--log-format=json", "--dynamic-mig",
        "--mig-plan-timeout-s=30", "--leader-elect=true",
        "--lease-namespace=kube-system", "--lease-name=gpusched", "--metrics-addr=0.0.0.0:10259",
        "--webhook-addr=0.0.0.0:9443", "--webhook-cert=/etc/gpusched/webhook/tls.crt",
        "--webhook-key=/etc/gpusched/webhook/tls.key"]
if args != want:
    sys.exit("args %s, want %s" % (args, want))
print("\n".join(args))
PY
if [ -n "$bin" ]; then
    mapfile -t args <"$tmp/args"
    "$bin" "${args[@]}" --help >/dev/null 2>"$tmp/args.err" ||
        fail "gpusched refuses the chart's args ${args[*]}: $(cat "$tmp/args.err")"
fi
"$helm" template gpusched "$CHART" -s templates/scheduler.yaml >"$tmp/plain-args.yaml"
grep -q -- '--kai-preemptible-threshold\|--pool-label\|--log-format\|--dynamic-mig\|--mig-plan' \
    "$tmp/plain-args.yaml" &&
    fail "the defaults render --kai-preemptible-threshold, --pool-label, --log-format or --dynamic-mig"
if [ -n "$bin" ]; then # the defaults' args too (--lease-namespace=kube-system and the like)
    mapfile -t args < <(python3 -c 'import sys, yaml
d = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "Deployment"][0]
print("\n".join(d["spec"]["template"]["spec"]["containers"][0]["args"]))' "$tmp/plain-args.yaml")
    "$bin" "${args[@]}" --help >/dev/null 2>"$tmp/args.err" ||
        fail "gpusched refuses the default chart's args ${args[*]}: $(cat "$tmp/args.err")"
fi
# The agent's log format: its DaemonSet's args, taken by the binary (agent --help exits 0 only
# after every option before it parsed).
"$helm" template gpusched "$CHART" -s templates/agent-daemonset.yaml --set agent.logFormat=json \
    >"$tmp/agent-args.yaml"
mapfile -t args < <(python3 -c 'import sys, yaml
d = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "DaemonSet"][0]
print("\n".join(d["spec"]["template"]["spec"]["containers"][0]["args"]))' "$tmp/agent-args.yaml")
[ "${args[*]}" = "agent --config /etc/gpusched/config.yaml --log-format json" ] ||
    fail "agent.logFormat=json renders args '${args[*]}'"
if [ -n "$bin" ]; then
    "$bin" "${args[@]}" --help >/dev/null 2>"$tmp/args.err" ||
        fail "gpusched refuses the agent's args ${args[*]}: $(cat "$tmp/args.err")"
fi
for bad in 'scheduler.kaiPreemptibleThreshold=1.5' 'scheduler.kaiPreemptibleThreshold=3000000000' \
    'scheduler.logFormat=xml' 'agent.logFormat=xml'; do
    "$helm" template gpusched "$CHART" --set "$bad" >/dev/null 2>"$tmp/bad-flag.err" &&
        fail "--set $bad was rendered"
    grep -q "must be" "$tmp/bad-flag.err" || fail "--set $bad: $(cat "$tmp/bad-flag.err")"
done
for bad in 0 3601 1.5 soon; do
    "$helm" template gpusched "$CHART" --set scheduler.dynamicMig.enabled=true \
        --set "scheduler.dynamicMig.planTimeoutSeconds=$bad" >/dev/null 2>"$tmp/bad-flag.err" &&
        fail "planTimeoutSeconds=$bad was rendered"
    grep -q "planTimeoutSeconds must be a whole number of seconds from 1 to 3600" \
        "$tmp/bad-flag.err" || fail "planTimeoutSeconds=$bad: $(cat "$tmp/bad-flag.err")"
done
echo "ok: kaiPreemptibleThreshold, poolLabel, logFormat (scheduler and agent), dynamicMig reach the args${bin:+ (gpusched takes them)}; the defaults add none; 1.5, 3000000000, xml and a plan timeout of 0 are refused"

# 2. The defaults render the plain manifests.
"$helm" template gpusched "$CHART" -n gpusched-system --include-crds >"$tmp/chart.yaml"
python3 - "$tmp/chart.yaml" "$tmp" "$SRC/deploy" <<'PY' || fail "the chart and deploy/ differ"
import base64, glob, os, subprocess, sys, yaml
chart_file, tmp, deploy = sys.argv[1:4]

def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]

def key(o):
    m = o["metadata"]
    return (o["kind"], m.get("namespace", ""), m["name"])

plain_files = sorted(glob.glob(os.path.join(deploy, "crds", "*.yaml"))) + [
    os.path.join(deploy, f) for f in (
        "scheduler-rbac.yaml", "scheduler.yaml", "webhook.yaml", "priorityclasses.yaml",
        "queues-example.yaml", "agent-rbac.yaml", "agent-config.yaml", "daemonset.yaml")]
plain = {}
for p in plain_files:
    for o in load(p):
        if o["kind"] != "Namespace":
            plain[key(o)] = o
chart = {key(o): o for o in load(chart_file)}

secret = chart.pop(("Secret", "gpusched-system", "gpusched-webhook-tls"), None)
assert secret and secret["type"] == "kubernetes.io/tls", "no webhook Secret in the chart"
mwc = ("MutatingWebhookConfiguration", "", "gpusched-fractions")
ca_bundle = chart[mwc]["webhooks"][0]["clientConfig"]["caBundle"]
assert ca_bundle == secret["data"]["ca.crt"], "caBundle is not the Secret's CA"
for name in ("ca.crt", "tls.crt", "tls.key"):
    with open(os.path.join(tmp, name), "wb") as f:
        f.write(base64.b64decode(secret["data"][name]))
v = subprocess.run(["openssl", "verify", "-CAfile", os.path.join(tmp, "ca.crt"),
                    "-verify_hostname", "gpusched-webhook.gpusched-system.svc",
                    os.path.join(tmp, "tls.crt")], capture_output=True, text=True)
assert v.returncode == 0, "certificate does not verify: " + v.stdout + v.stderr
chart[mwc]["webhooks"][0]["clientConfig"]["caBundle"] = ""

bad = False
for k in sorted(set(plain) | set(chart)):
    if k not in chart:
        print("only in deploy/:", k, file=sys.stderr); bad = True
    elif k not in plain:
        print("only in the chart:", k, file=sys.stderr); bad = True
    elif plain[k] != chart[k]:
        bad = True
        print("differs:", k, file=sys.stderr)
        a = yaml.safe_dump(plain[k], sort_keys=True).splitlines()
        b = yaml.safe_dump(chart[k], sort_keys=True).splitlines()
        import difflib
        for line in difflib.unified_diff(a, b, "deploy/", "chart", lineterm="", n=2):
            print("   ", line, file=sys.stderr)
if bad:
    sys.exit(1)
kinds = {}
for k in chart:
    kinds[k[0]] = kinds.get(k[0], 0) + 1
print("ok: the chart renders deploy/'s %d objects (%s) + the webhook Secret; its certificate "
      "verifies for gpusched-webhook.gpusched-system.svc" %
      (len(chart), ", ".join("%d %s" % (n, k) for k, n in sorted(kinds.items()))))
PY

# 3. Applied to the API server: CRDs and namespace for real, the rest dry-run on the server.
kubectl create namespace "$ns" >/dev/null
"$helm" template gpusched "$CHART" -n "$ns" --set scheduler.leaseNamespace="$ns" \
    --include-crds >"$tmp/ns.yaml"
python3 - "$tmp/ns.yaml" "$tmp/crds.yaml" "$tmp/rest.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
rest = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
yaml.safe_dump_all(crds, open(sys.argv[2], "w"))
yaml.safe_dump_all(rest, open(sys.argv[3], "w"))
PY
kubectl apply -f "$tmp/crds.yaml" >/dev/null # as the other tests apply deploy/crds/
kubectl wait --for condition=established --timeout=30s \
    crd/queues.scheduling.gpusched.io crd/podgroups.scheduling.x-k8s.io >/dev/null
# --force-conflicts: other tests on the shared plane may have applied deploy/ objects of the same
# names (agent_e2e.py applies deploy/agent-rbac.yaml); field ownership is not what this checks.
kubectl apply --server-side --dry-run=server --force-conflicts --field-manager=helm-chart-test \
    -f "$tmp/rest.yaml" >"$tmp/apply.log" 2>&1 || { cat "$tmp/apply.log" >&2; fail "the API server refused the chart"; }
n=$(grep -c 'serverside-applied (server dry run)' "$tmp/apply.log" || true)
want=$(grep -c '^kind:' "$tmp/rest.yaml")
[ "$n" = "$want" ] || { cat "$tmp/apply.log" >&2; fail "$n of $want objects accepted"; }
echo "ok: the API server accepts all $want objects (server-side dry run) and the 2 CRDs"

"$helm" template gpusched "$CHART" -n "$ns" --set webhook.failurePolicy=Sometimes >"$tmp/bad.yaml"
if kubectl apply --server-side --dry-run=server -f "$tmp/bad.yaml" >"$tmp/bad.log" 2>&1; then
    fail "a MutatingWebhookConfiguration with failurePolicy Sometimes was accepted"
fi
grep -q 'failurePolicy' "$tmp/bad.log" || { cat "$tmp/bad.log" >&2; fail "the refusal does not name failurePolicy"; }
echo "ok: a bad value is refused: $(grep -m1 -o 'webhooks\[0\].failurePolicy: Unsupported value: "[^"]*"' "$tmp/bad.log")"

# 4. The plain manifests' certificate script.
bash "$SRC/deploy/webhook-cert.sh" --namespace "$ns" --dry-run >"$tmp/cert.yaml"
grep -q 'caBundle: ""' "$tmp/cert.yaml" && fail "webhook-cert.sh left caBundle empty"
kubectl apply --server-side --dry-run=server -f "$tmp/cert.yaml" >"$tmp/cert.log" 2>&1 ||
    { cat "$tmp/cert.log" >&2; fail "webhook-cert.sh's objects were refused"; }
echo "ok: deploy/webhook-cert.sh makes a Secret, Service and configuration the server accepts"
