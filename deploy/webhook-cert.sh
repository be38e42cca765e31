#!/usr/bin/env bash
# Makes the certificate of the scheduler's admission webhook and registers the webhook: a CA and
# a serving certificate for gpusched-webhook.NAMESPACE.svc made by openssl (ECDSA P-256), stored
# as the kubernetes.io/tls Secret NAMESPACE/gpusched-webhook-tls that deploy/scheduler.yaml
# mounts, then deploy/webhook.yaml applied with that CA as its caBundle. Run it again to renew
# (then `kubectl -n NAMESPACE rollout restart deployment gpusched-scheduler`). The Helm chart
# (deploy/helm/gpusched) does the same without this script.
#
#   deploy/webhook-cert.sh [--namespace NS] [--days N] [--dry-run]
#     --namespace NS  where the scheduler runs (default gpusched-system)
#     --days N        validity of both certificates (default 3650)
#     --dry-run       print the objects instead of applying them
# Needs openssl and kubectl (with the cluster's current context).
set -euo pipefail

ns=gpusched-system
days=3650
dry=0
while [ $# -gt 0 ]; do
    case $1 in
    --namespace) ns=$2; shift 2 ;;
    --days) days=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
svc=gpusched-webhook.$ns.svc

openssl ecparam -name prime256v1 -genkey -noout -out "$d/ca.key" 2>/dev/null
openssl req -x509 -new -key "$d/ca.key" -subj "/CN=gpusched-webhook-ca" -days "$days" -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" \
    -out "$d/ca.crt" 2>/dev/null
openssl ecparam -name prime256v1 -genkey -noout -out "$d/tls.key" 2>/dev/null
openssl req -new -key "$d/tls.key" -subj "/CN=$svc" -out "$d/tls.csr" 2>/dev/null
printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:%s,DNS:%s,DNS:%s.cluster.local\n' \
    "gpusched-webhook.$ns" "$svc" "$svc" >"$d/ext"
openssl x509 -req -in "$d/tls.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days "$days" -sha256 -extfile "$d/ext" -out "$d/tls.crt" 2>/dev/null

ca=$(base64 -w0 <"$d/ca.crt")
# The Service and configuration of deploy/webhook.yaml, moved to NS, with the CA.
sed -e "s|namespace: gpusched-system|namespace: $ns|" \
    -e "s|values: \[kube-system, kube-public, kube-node-lease, gpusched-system\]|values: [kube-system, kube-public, kube-node-lease, $ns]|" \
    -e "s|caBundle: \"\"|caBundle: \"$ca\"|" "$here/webhook.yaml" >"$d/webhook.yaml"
kubectl -n "$ns" create secret tls gpusched-webhook-tls --cert "$d/tls.crt" --key "$d/tls.key" \
    --dry-run=client -o yaml >"$d/secret.yaml"
if [ "$dry" = 1 ]; then
    cat "$d/secret.yaml"
    echo ---
    cat "$d/webhook.yaml"
    exit 0
fi
kubectl apply -f "$d/secret.yaml"
kubectl apply -f "$d/webhook.yaml"
echo "webhook-cert.sh: Secret $ns/gpusched-webhook-tls and the webhook registered (CA valid $days days)"
