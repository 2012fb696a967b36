#!/usr/bin/env bash
# Builds a Kubernetes control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler), etcd and kwok from their official Go modules, fetched
# through the Go module proxy. Nothing prebuilt is downloaded.
#
# Usage: tools/k8s/build.sh [--print-dir]
#
# The binaries go to ${CATCHUP_K8S_BIN:-$HOME/.cache/catchup-assets/k8s}/<key>/
# where <key> names the versions pinned in the go.mod files next to this script
# (./go.mod: k8s.io/kubernetes, ./etcd/go.mod: etcd, ./kwok/go.mod: kwok).
# A binary already there whose --version answers with the expected version is
# kept; only the missing ones are built. Each binary is linked to a temporary
# name, checked, then renamed, so an interrupted build never leaves a binary
# that looks done.
#
# Next to kwok goes kwok-stages.yaml, kwok's default Stage objects (kwok does
# nothing without stages): kwok --config=<bin dir>/kwok-stages.yaml
# --node-lease-duration-seconds=40 ...
#
# Progress and timings go to stderr; stdout gets one line, the bin directory:
#   bin_dir=$(tools/k8s/build.sh)
# --print-dir prints that directory without building (it may not exist yet).
#
# Environment:
#   CATCHUP_K8S_BIN   cache root (default $HOME/.cache/catchup-assets/k8s)
#   CATCHUP_K8S_NICE  niceness of the go commands (default 19; the build takes
#                     minutes of CPU and should yield to everything else)
#   GO                the go command (default: go on PATH, else /usr/local/go/bin/go)
#   SOURCE_DATE_EPOCH if set, the build date stamped into the Kubernetes binaries
#                     (as Kubernetes' own hack/lib/version.sh does); else now.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

print_dir_only=0
case "${1:-}" in
  "") ;;
  --print-dir) print_dir_only=1 ;;
  -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
  *) echo "usage: $0 [--print-dir]" >&2; exit 2 ;;
esac

log() { printf '[k8s-build] %s\n' "$*" >&2; }

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

k8s_version="$(required_version "$here/go.mod" k8s.io/kubernetes)"
etcd_version="$(required_version "$here/etcd/go.mod" go.etcd.io/etcd/server/v3)"
kwok_version="$(required_version "$here/kwok/go.mod" sigs.k8s.io/kwok)"

key="k8s-${k8s_version}-etcd-${etcd_version}-kwok-${kwok_version}"
bin_dir="${CATCHUP_K8S_BIN:-$HOME/.cache/catchup-assets/k8s}/${key}"

if (( print_dir_only )); then
  printf '%s\n' "$bin_dir"
  exit 0
fi

# name|module dir|package|what --version must print
k8s_major="${k8s_version#v}"; k8s_major="${k8s_major%%.*}"
k8s_minor="${k8s_version#v*.}"; k8s_minor="${k8s_minor%%.*}"
binaries=(
  "kube-apiserver|$here|k8s.io/kubernetes/cmd/kube-apiserver|Kubernetes ${k8s_version}"
  "kube-controller-manager|$here|k8s.io/kubernetes/cmd/kube-controller-manager|Kubernetes ${k8s_version}"
  "kube-scheduler|$here|k8s.io/kubernetes/cmd/kube-scheduler|Kubernetes ${k8s_version}"
  "etcd|$here/etcd|go.etcd.io/etcd/server/v3|etcd Version: ${etcd_version#v}"
  "kwok|$here/kwok|sigs.k8s.io/kwok/cmd/kwok|${kwok_version}"
)

# True when $1 exists, is executable and its --version prints $2.
answers() { # <binary> <expected substring>
  local out
  [[ -x "$1" ]] || return 1
  out="$(timeout 30 "$1" --version 2>&1)" || return 1
  [[ "$out" == *"$2"* ]]
}

find_missing() { # fills the array missing; quiet with -q
  missing=()
  local entry name expect
  for entry in "${binaries[@]}"; do
    IFS='|' read -r name _ _ expect <<<"$entry"
    if answers "$bin_dir/$name" "$expect" &&
       { [[ "$name" != kwok ]] || [[ -s "$bin_dir/kwok-stages.yaml" ]]; }; then
      [[ "${1:-}" == -q ]] || log "$name: present in $bin_dir, skipped"
    else
      missing+=("$entry")
    fi
  done
}
find_missing

if (( ${#missing[@]} == 0 )); then
  printf '%s\n' "$bin_dir"
  exit 0
fi

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
[[ -x "$GO" ]] || { echo "build.sh: no go command (set GO=...)" >&2; exit 1; }
nice_n="${CATCHUP_K8S_NICE:-19}"
gocmd() { nice -n "$nice_n" "$GO" "$@"; }

mkdir -p "$bin_dir"
# One build at a time per key: a second caller waits, then finds the binaries.
exec 9>"$bin_dir/.build.lock"
if ! flock -n 9; then
  log "another build of $bin_dir is running; waiting for it"
  flock 9
  find_missing -q
  if (( ${#missing[@]} == 0 )); then
    printf '%s\n' "$bin_dir"
    exit 0
  fi
fi
tmp_prefix="$bin_dir/.partial"
rm -f "$tmp_prefix".*            # left by an interrupted build
trap 'rm -f "$tmp_prefix".*' EXIT

export CGO_ENABLED=0
log "$("$GO" version), bin dir $bin_dir"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
total_start="$(now)"

# Download the modules of each go.mod whose binaries are missing.
module_dirs=()
for entry in "${missing[@]}"; do
  IFS='|' read -r _ moddir _ _ <<<"$entry"
  seen=0
  for d in "${module_dirs[@]}"; do [[ "$d" == "$moddir" ]] && seen=1; done
  (( seen )) || module_dirs+=("$moddir")
done
for moddir in "${module_dirs[@]}"; do
  t="$(now)"
  rel="tools/k8s${moddir#"$here"}/go.mod"
  log "download: modules of $rel ..."
  (cd "$moddir" && gocmd mod download)
  log "download: $rel done in $(since "$t")s"
done

build_date="$(date -u ${SOURCE_DATE_EPOCH:+--date=@${SOURCE_DATE_EPOCH}} +%Y-%m-%dT%H:%M:%SZ)"
k8s_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X ${pkg}.gitVersion=${k8s_version}"
  k8s_ldflags+=" -X ${pkg}.gitMajor=${k8s_major}"
  k8s_ldflags+=" -X ${pkg}.gitMinor=${k8s_minor}"
  k8s_ldflags+=" -X ${pkg}.gitTreeState=clean"
  k8s_ldflags+=" -X ${pkg}.buildDate=${build_date}"
done
# etcd's version.Version already is the release's; its build script stamps the
# git SHA, which a module zip does not carry ("GitNotFound" is its own fallback).
etcd_ldflags="-X go.etcd.io/etcd/api/v3/version.GitSHA=GitNotFound"
kwok_ldflags="-X sigs.k8s.io/kwok/pkg/consts.Version=${kwok_version}"

# kwok does nothing without Stage objects: kwokctl passes it its defaults, which
# live in the kwok module as YAML. Copy them next to the binary, so a caller
# runs `kwok --config=$bin_dir/kwok-stages.yaml --node-lease-duration-seconds=40`.
write_kwok_stages() {
  local src tmp="$tmp_prefix.kwok-stages.yaml.$$" f
  src="$(cd "$here/kwok" && "$GO" list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage"
  {
    echo "# kwok ${kwok_version}'s default stages, as kwokctl configures them (node-initialize,"
    echo "# node-heartbeat-with-lease, pod-ready, pod-complete, pod-delete), copied by"
    echo "# tools/k8s/build.sh from sigs.k8s.io/kwok@${kwok_version}/kustomize/stage/."
    echo "# Use: kwok --config=<this file> --node-lease-duration-seconds=40 ..."
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
             pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
      echo "---"
      echo "# $f"
      cat "$src/$f"
    done
  } > "$tmp"
  mv -f "$tmp" "$bin_dir/kwok-stages.yaml"
  log "kwok: default stages written to $bin_dir/kwok-stages.yaml"
}

for entry in "${missing[@]}"; do
  IFS='|' read -r name moddir pkg expect <<<"$entry"
  case "$name" in
    kube-*) extra="$k8s_ldflags" ;;
    etcd) extra="$etcd_ldflags" ;;
    kwok) extra="$kwok_ldflags" ;;
  esac
  t="$(now)"
  log "$name: building $pkg ..."
  tmp="$tmp_prefix.$name.$$"
  (cd "$moddir" && gocmd build -trimpath -ldflags "-s -w${extra:+ $extra}" -o "$tmp" "$pkg")
  if ! answers "$tmp" "$expect"; then
    log "$name: built, but '$name --version' does not print '$expect':"
    timeout 30 "$tmp" --version >&2 || true
    exit 1
  fi
  mv -f "$tmp" "$bin_dir/$name"
  log "$name: built in $(since "$t")s ($(du -h "$bin_dir/$name" | cut -f1))"
  if [[ "$name" == kwok ]]; then
    write_kwok_stages
  fi
done

log "all built in $(since "$total_start")s"
printf '%s\n' "$bin_dir"
