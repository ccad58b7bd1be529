#!/usr/bin/env bash
# Pins the control plane to another Kubernetes release: k8s.io/kubernetes at v1.X.Y, every staging
# module it replaces locally at v0.X.Y, and etcd's server at the version Kubernetes itself pins.
# The replace list is read from that release's own go.mod, so modules added upstream are picked up.
set -euo pipefail
version=${1:?usage: bump.sh v1.X.Y}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "bump.sh: '$version' is not a release like v1.36.3" >&2; exit 2; }
staging=v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}
cd "$(dirname "$0")"
export GOTOOLCHAIN=local
upstream=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
etcd=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2 }' "$upstream")
for m in $(awk '$1 == "replace" { print $2 }' go.mod); do go mod edit -dropreplace="$m"; done
go mod edit -go="$(awk '$1 == "go" { print $2 }' "$upstream")"
godebug=$(awk '$1 == "godebug" { print $2 }' "$upstream")
[ -z "$godebug" ] || go mod edit -godebug="$godebug"
for m in $(grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$upstream" | awk '{ print $1 }'); do
  go mod edit -replace="$m=$m@$staging"
done
go mod edit -require="k8s.io/kubernetes@$version" -require="go.etcd.io/etcd/server/v3@$etcd"
go mod tidy
# `cirrus version` names the release it targets (app/cli/version.ts).
sed -i.bak "s/^export const kubernetesRelease = .*/export const kubernetesRelease = '$version';/" ../../app/cli/version.ts
rm -f ../../app/cli/version.ts.bak
echo "pinned kubernetes $version (staging $staging), etcd $etcd"
