{{- define "catchup.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "catchup.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "catchup.labels" -}}
app.kubernetes.io/name: {{ include "catchup.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "catchup.selectorLabels" -}}
app.kubernetes.io/name: {{ include "catchup.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: code-location
{{- end -}}

{{/* The console's pods: not the code location's selector, so its gRPC Service never routes to them. */}}
{{- define "catchup.consoleSelectorLabels" -}}
app.kubernetes.io/name: {{ include "catchup.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: console
{{- end -}}

{{- define "catchup.serviceAccountName" -}}
{{- default (printf "%s-mission" (include "catchup.fullname" .)) .Values.serviceAccount.name -}}
{{- end -}}

{{/* Where range Jobs, their PVCs, the worker ConfigMap and account, and the mission's Role live:
not the release's namespace, which holds Dagster's Secrets (values.yaml, missionNamespace). */}}
{{- define "catchup.missionNamespace" -}}
{{- $v := .Values.missionNamespace | default "" -}}
{{- $name := $v -}}
{{- if kindIs "map" $v }}{{ $name = get $v "name" | default "" }}{{ end -}}
{{- default (printf "%s-missions" .Release.Namespace | trunc 63 | trimSuffix "-") $name -}}
{{- end -}}

{{/* "true" when the chart creates the mission namespace: missionNamespace.create (default true). The
older string form, missionNamespace: NAME, names a namespace the operator made, as it always did. */}}
{{- define "catchup.createMissionNamespace" -}}
{{- $v := .Values.missionNamespace -}}
{{- if kindIs "map" $v -}}{{- (hasKey $v "create" | ternary (get $v "create") true) | toString -}}
{{- else -}}false{{- end -}}
{{- end -}}

{{/* The range pods' own account: bound to nothing, its token never mounted. */}}
{{- define "catchup.workerServiceAccountName" -}}
{{- default (printf "%s-worker" (include "catchup.fullname" .)) .Values.workerServiceAccount.name -}}
{{- end -}}

{{- define "catchup.configmapName" -}}
{{- printf "%s-worker" (include "catchup.fullname" .) -}}
{{- end -}}

{{- define "catchup.locationConfigmapName" -}}
{{- printf "%s-location" (include "catchup.fullname" .) -}}
{{- end -}}

{{/* repository:tag, or repository@sha256:... for a digest (the schema admits only these). */}}
{{- define "catchup.image" -}}
{{- $ref := trimPrefix "@" .tag -}}
{{- if hasPrefix "sha256:" $ref -}}
{{- printf "%s@%s" .repository $ref -}}
{{- else -}}
{{- printf "%s:%s" .repository $ref -}}
{{- end -}}
{{- end -}}

{{/* Values key -> resource field, per block: GENERATED from the resource's config models into
files/keys.json (`uv run python -m catchup_assets.defs.resources.chart_schema`, with values.schema.json). */}}
{{- define "catchup.keys" -}}
{{- .Files.Get "files/keys.json" -}}
{{- end -}}

{{/* The values of .from that .keys names, under their fields' names. Unset (null) values are left
out: the project's own default applies. */}}
{{- define "catchup.pick" -}}
{{- $out := dict -}}
{{- range $key, $field := .keys -}}
{{- $v := index $.from $key -}}
{{- if not (kindIs "invalid" $v) }}{{- $_ := set $out $field $v -}}{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* Each of the list .items picked by .keys (tiers, shapes, tolerations as the resource spells them). */}}
{{- define "catchup.pickEach" -}}
{{- $out := list -}}
{{- range .items -}}
{{- $out = append $out (include "catchup.pick" (dict "from" . "keys" $.keys) | fromJson) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* Every tier the sizing can choose: the ladder, then the two catch-alls. */}}
{{- define "catchup.allTiers" -}}
{{- toJson (concat .Values.tiers (list .Values.unprofiledTier .Values.noProfileTier)) -}}
{{- end -}}

{{/* The `catchup` resource config (CatchupResource) this release implies, for the launchpad. */}}
{{- define "catchup.settings" -}}
{{- $keys := include "catchup.keys" . | fromJson -}}
{{- $k8s := include "catchup.pick" (dict "from" .Values "keys" $keys.kubernetes) | fromJson -}}
{{- $k8s = merge $k8s (include "catchup.pick" (dict "from" .Values.kubelet "keys" $keys.kubelet) | fromJson) -}}
{{- /* What the release decides: the mission namespace, the worker image, account and ConfigMap. */ -}}
{{- $_ := set $k8s "namespace" (include "catchup.missionNamespace" .) -}}
{{- $_ := set $k8s "image" (include "catchup.image" .Values.workerImage) -}}
{{- $_ := set $k8s "image_pull_policy" .Values.workerImage.pullPolicy -}}
{{- $_ := set $k8s "worker_service_account" (include "catchup.workerServiceAccountName" .) -}}
{{- $_ := set $k8s "configmap" (include "catchup.configmapName" .) -}}
{{- $_ := set $k8s "extra_tolerations" (include "catchup.pickEach" (dict "items" .Values.extraTolerations "keys" $keys.toleration) | fromJsonArray) -}}
{{- $catchup := include "catchup.pick" (dict "from" .Values "keys" $keys.catchup) | fromJson -}}
{{- $catchup = merge $catchup (include "catchup.pick" (dict "from" .Values "keys" $keys.passThrough) | fromJson) -}}
{{- $_ := set $catchup "backend" "kubernetes" -}}
{{- $_ := set $catchup "kubernetes" $k8s -}}
{{- /* The launchpad's mission_plan defaults and the caps a plan may not pass (MissionDefaultsConfig). */ -}}
{{- $_ := set $catchup "mission_defaults" (include "catchup.pick" (dict "from" .Values "keys" $keys.missionDefaults) | fromJson) -}}
{{- $_ := set $catchup "tiers" (include "catchup.pickEach" (dict "items" .Values.tiers "keys" $keys.tier) | fromJsonArray) -}}
{{- $_ := set $catchup "unprofiled_tier" (include "catchup.pick" (dict "from" .Values.unprofiledTier "keys" $keys.tier) | fromJson) -}}
{{- $_ := set $catchup "no_profile_tier" (include "catchup.pick" (dict "from" .Values.noProfileTier "keys" $keys.tier) | fromJson) -}}
{{- $_ := set $catchup "catalog" (include "catchup.pickEach" (dict "items" .Values.catalog "keys" $keys.shape) | fromJsonArray) -}}
{{- /* A ledger number may be given as a number (`--set tipSource=60000000`): the resource takes a string. */ -}}
{{- $tip := .Values.tipSource | default "" -}}
{{- if not (kindIs "string" $tip) }}{{- $tip = $tip | int64 | toString -}}{{- end -}}
{{- $_ := set $catchup "tip_source" $tip -}}
{{- $_ := set $catchup "metrics_port" (include "catchup.metricsPort" . | int) -}}
{{- toJson $catchup -}}
{{- end -}}

{{/* The launchpad's run config: the mission's choices only. The deployment's settings are
catchup.json's, fixed when the code location loads: a run config that sets resources.catchup
is refused (catchup_assets/defs/resources/deployment.py). */}}
{{- define "catchup.runConfig" -}}
{{- $plan := dict -}}
{{- if not (kindIs "invalid" .Values.parallelism) }}{{- $_ := set $plan "parallelism" .Values.parallelism -}}{{- end -}}
{{- $cfg := dict "ops" (dict "mission_plan" (dict "config" $plan)) -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* The port the dispatcher serves /metrics on in its run pod: the `metricsPort` value, 9464 when
unset (the resource's own default is 0, off, for a laptop; in a cluster the PodMonitor scrapes it);
0: no endpoint. catchup.json's metrics_port and the run pod's declared port both come from here. */}}
{{- define "catchup.metricsPort" -}}
{{- if kindIs "invalid" .Values.metricsPort -}}9464{{- else -}}{{- .Values.metricsPort | int -}}{{- end -}}
{{- end -}}

{{/* The labels every run pod of this release carries besides Dagster's own (its K8sRunLauncher
sets app.kubernetes.io/component: run_worker on every run pod of every code location): what the
PodMonitor selects, so it scrapes this release's dispatchers and no other location's runs. */}}
{{- define "catchup.runPodLabels" -}}
app.kubernetes.io/component: run_worker
catchup.stellar.org/dispatcher: {{ include "catchup.fullname" . }}
{{- end -}}

{{/* The code location's container context (DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT), which the
K8sRunLauncher applies to each run pod: its namespace and account, the storage root, this location's
ConfigMap at /etc/catchup, the labels above, and the metrics port, named so the PodMonitor scrapes
it by name whatever its number. */}}
{{- define "catchup.runContainerContext" -}}
{{- $k8s := dict "namespace" .Release.Namespace "service_account_name" (include "catchup.serviceAccountName" .) "image_pull_policy" .Values.image.pullPolicy -}}
{{- $_ := set $k8s "env_vars" (list (printf "CATCHUP_STORAGE_ROOT=%s" .Values.storageRoot)) -}}
{{- /* The storage root's credentials: the Secret's keys as the run pod's env (envFrom), never a value here. */ -}}
{{- with .Values.storageCredentialsSecret }}{{- if .name }}{{- $_ := set $k8s "env_secrets" (list .name) -}}{{- end }}{{- end -}}
{{- /* The run pod's root filesystem is read-only (catchup.runPodSecurity): what a run worker writes
goes to emptyDirs of its own, /tmp (also HOME in the image), DAGSTER_HOME (the instance's local
artifact storage and compute logs) and the work dir, as on the code server. */ -}}
{{- $vols := list (dict "name" "location" "configMap" (dict "name" (include "catchup.locationConfigmapName" .))) -}}
{{- $mounts := list (dict "name" "location" "mountPath" "/etc/catchup" "readOnly" true) -}}
{{- range $name, $path := include "catchup.runPodScratch" . | fromYaml -}}
{{- $vols = append $vols (dict "name" $name "emptyDir" dict) -}}
{{- $mounts = append $mounts (dict "name" $name "mountPath" $path) -}}
{{- end -}}
{{- $_ := set $k8s "volumes" $vols -}}
{{- $_ := set $k8s "volume_mounts" $mounts -}}
{{- /* Dagster's own run_worker label is set by the launcher itself: only ours is added here. */ -}}
{{- $labels := include "catchup.runPodLabels" . | fromYaml -}}
{{- $_ := set $k8s "labels" (omit $labels "app.kubernetes.io/component") -}}
{{- $sc := include "catchup.runPodSecurity" . | fromYaml -}}
{{- $container := dict "securityContext" $sc.container -}}
{{- $port := include "catchup.metricsPort" . | int -}}
{{- if gt $port 0 -}}
{{- $_ := set $container "ports" (list (dict "name" "metrics" "containerPort" $port "protocol" "TCP")) -}}
{{- end -}}
{{- $_ := set $k8s "run_k8s_config" (dict "container_config" $container "pod_spec_config" (dict "securityContext" $sc.pod)) -}}
{{- toJson (dict "k8s" $k8s) -}}
{{- end -}}

{{/* The run pods' writable paths, volume name -> mount path: each an emptyDir. The names are those
charts/dagster-values.yaml gives the same emptyDirs, so that the K8sRunLauncher, which merges its
runK8sConfig with this context and drops the exact duplicates, mounts each once. */}}
{{- define "catchup.runPodScratch" -}}
tmp: /tmp
dagster-home: /opt/dagster/dagster_home
work: {{ .Values.workDir }}
{{- end -}}

{{/* A run pod holds the mission's Job-creating token and Dagster's Postgres password: it runs as
the image's non-root user (the code server's uid, codeLocation.securityContext), with no
capabilities, no privilege escalation, the runtime's seccomp profile and a read-only root: the
Pod Security Standards' restricted profile (docs/deploy.md, "Pod security"). */}}
{{- define "catchup.runPodSecurity" -}}
{{- $sc := .Values.codeLocation.securityContext -}}
pod:
  runAsNonRoot: true
  runAsUser: {{ $sc.runAsUser }}
  runAsGroup: {{ $sc.runAsGroup }}
  fsGroup: {{ $sc.fsGroup }}
  seccompProfile:
    type: RuntimeDefault
container:
  runAsNonRoot: true
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: ["ALL"]
{{- end -}}
