#!/usr/bin/env bash
# Generates the Prometheus Operator's CRDs (monitoring.coreos.com) the way the
# operator's own `make generate-crds` does: controller-gen, built from
# sigs.k8s.io/controller-tools, run with `crd:crdVersions=v1` over the API
# types of github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring
# (their kubebuilder markers are the schema), both modules fetched through the
# Go module proxy. No YAML is downloaded: the proxy refuses the operator's main
# module, which holds the published copies (example/prometheus-operator-crd/).
#
# Usage: tools/crds/build.sh [--print-dir]
#
# The CRDs go to ${CATCHUP_K8S_BIN:-$HOME/.cache/catchup-assets/k8s}/<key>/
# where <key> names the two versions pinned in the go.mod next to this script.
# Upstream's published set, one file per CRD: monitoring.coreos.com_podmonitors.yaml,
# monitoring.coreos.com_prometheusrules.yaml, ... (the tests need those two).
# Each carries the annotations upstream's carry: controller-gen's version, and
# operator.prometheus.io/version, which upstream adds after controller-gen
# (scripts/generate/append-operator-version.sh). A directory already there is
# kept. The CRDs are generated into a temporary directory, then renamed into
# place, so an interrupted build never leaves a directory that looks done.
#
# Progress and timings go to stderr; stdout gets one line, the CRD directory:
#   crd_dir=$(tools/crds/build.sh)
# --print-dir prints that directory without building (it may not exist yet).
#
# Environment:
#   CATCHUP_K8S_BIN   cache root (default $HOME/.cache/catchup-assets/k8s)
#   CATCHUP_K8S_NICE  niceness of the go commands (default 19)
#   GO                the go command (default: go on PATH, else /usr/local/go/bin/go)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

print_dir_only=0
case "${1:-}" in
  "") ;;
  --print-dir) print_dir_only=1 ;;
  -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
  *) echo "usage: $0 [--print-dir]" >&2; exit 2 ;;
esac

log() { printf '[crds-build] %s\n' "$*" >&2; }

# The version a go.mod requires for a module, read from the file itself (no go
# command, no network), so --print-dir is instant.
required_version() { # <go.mod> <module path>
  local v
  v="$(sed -nE "s#^[[:space:]]*(require[[:space:]]+)?${2//./\\.}[[:space:]]+(v[^[:space:]]+).*#\\2#p" "$1" | head -n1)"
  if [[ -z "$v" ]]; then
    echo "build.sh: $1 does not require $2" >&2
    exit 1
  fi
  printf '%s' "$v"
}

monitoring_module=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring
monitoring_version="$(required_version "$here/go.mod" "$monitoring_module")"
tools_version="$(required_version "$here/go.mod" sigs.k8s.io/controller-tools)"

root="${CATCHUP_K8S_BIN:-$HOME/.cache/catchup-assets/k8s}"
key="crds-${monitoring_version}-controller-tools-${tools_version}"
crd_dir="${root}/${key}"
# What the tests apply; the build fails without them.
needed=(monitoring.coreos.com_podmonitors.yaml monitoring.coreos.com_prometheusrules.yaml)

if (( print_dir_only )); then
  printf '%s\n' "$crd_dir"
  exit 0
fi

done_already() {
  local f
  for f in "${needed[@]}"; do
    grep -q "^    controller-gen.kubebuilder.io/version: ${tools_version}\$" "$crd_dir/$f" 2>/dev/null || return 1
  done
}

if done_already; then
  log "present in $crd_dir, skipped"
  printf '%s\n' "$crd_dir"
  exit 0
fi

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
[[ -x "$GO" ]] || { echo "build.sh: no go command (set GO=...)" >&2; exit 1; }
nice_n="${CATCHUP_K8S_NICE:-19}"
gocmd() { nice -n "$nice_n" "$GO" "$@"; }

mkdir -p "$root"
# One build at a time per key: a second caller waits, then finds the CRDs.
exec 9>"$root/.${key}.lock"
if ! flock -n 9; then
  log "another build of $crd_dir is running; waiting for it"
  flock 9
  if done_already; then
    printf '%s\n' "$crd_dir"
    exit 0
  fi
fi
rm -rf "$root/.${key}.partial."*   # left by an interrupted build
tmp="$(mktemp -d "$root/.${key}.partial.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

export CGO_ENABLED=0
log "$("$GO" version), CRD dir $crd_dir"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
total_start="$(now)"

t="$(now)"
log "download: modules of tools/crds/go.mod ..."
(cd "$here" && gocmd mod download)
log "download: done in $(since "$t")s"

t="$(now)"
log "controller-gen: building sigs.k8s.io/controller-tools/cmd/controller-gen ${tools_version} ..."
(cd "$here" && gocmd build -trimpath -ldflags "-s -w" -o "$tmp/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen)
# controller-gen stamps this into each CRD (controller-gen.kubebuilder.io/version).
if [[ "$("$tmp/controller-gen" --version)" != "Version: ${tools_version}" ]]; then
  log "controller-gen: built, but --version does not print 'Version: ${tools_version}':"
  "$tmp/controller-gen" --version >&2 || true
  exit 1
fi
log "controller-gen: built in $(since "$t")s"

# The module cache is read-only and controller-gen loads packages with the go
# command: it runs in a writable copy of the module, inside its own go.mod (the
# dependency versions upstream generates with), as upstream runs it from
# pkg/apis/monitoring.
t="$(now)"
src="$(cd "$here" && "$GO" list -m -f '{{.Dir}}' "$monitoring_module")"
cp -R "$src" "$tmp/monitoring"
chmod -R u+w "$tmp/monitoring"
log "generate: controller-gen crd:crdVersions=v1 over ${monitoring_module}@${monitoring_version} (v1, v1alpha1) ..."
(cd "$tmp/monitoring" && PATH="$(dirname "$GO"):$PATH" nice -n "$nice_n" "$tmp/controller-gen" \
  crd:crdVersions=v1 paths=./v1/. paths=./v1alpha1/. output:crd:dir="$tmp/out")
# As upstream's scripts/generate/append-operator-version.sh: the operator's
# version (its VERSION file, no "v"), right after controller-gen's.
sed -i "/^    controller-gen.kubebuilder.io.version.*/a\\    operator.prometheus.io/version: ${monitoring_version#v}" "$tmp/out"/*.yaml
for f in "${needed[@]}"; do
  [[ -s "$tmp/out/$f" ]] || { log "generate: no $f among $(ls "$tmp/out")"; exit 1; }
done
log "generate: $(ls "$tmp/out" | wc -l) CRDs in $(since "$t")s"

rm -rf "$crd_dir"                  # an incomplete one (done_already said no)
mv -T "$tmp/out" "$crd_dir"
log "all done in $(since "$total_start")s"
printf '%s\n' "$crd_dir"
