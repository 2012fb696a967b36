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

{{- define "catchup.serviceAccountName" -}}
{{- default (printf "%s-mission" (include "catchup.fullname" .)) .Values.serviceAccount.name -}}
{{- end -}}

{{/* Where range Jobs, their PVCs, the worker ConfigMap and account, and the mission's Role live:
not the release's namespace, which holds Dagster's Secrets (values.yaml, missionNamespace). */}}
{{- define "catchup.missionNamespace" -}}
{{- default (printf "%s-missions" .Release.Namespace | trunc 63 | trimSuffix "-") .Values.missionNamespace -}}
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

{{/* A tier of the values as the resource's TierConfig spells it. */}}
{{- define "catchup.tierConfig" -}}
{{- $t := dict "name" .name "memory_cut_gib" .memoryCutGib "cpu" .cpu -}}
{{- if .nodeMemoryGib }}{{- $_ := set $t "node_memory_gib" .nodeMemoryGib -}}{{- end -}}
{{- if .shape }}{{- $_ := set $t "shape" .shape -}}{{- end -}}
{{- if .capacityType }}{{- $_ := set $t "capacity_type" .capacityType -}}{{- end -}}
{{- if .exclusive }}{{- $_ := set $t "exclusive" .exclusive -}}{{- end -}}
{{- if .podsPerNode }}{{- $_ := set $t "pods_per_node" .podsPerNode -}}{{- end -}}
{{- toJson $t -}}
{{- end -}}

{{/* A catalog shape of the values as the resource's ShapeConfig spells it. */}}
{{- define "catchup.shapeConfig" -}}
{{- $s := dict "name" .name "memory_gib" .memoryGib "cpu" .cpu "on_demand_hourly" .onDemandHourly "spot_hourly" .spotHourly -}}
{{- range $key, $field := dict "allocatableMemoryGib" "allocatable_memory_gib" "allocatableCpu" "allocatable_cpu" "maxPods" "max_pods" -}}
{{- $v := index $ $key -}}
{{- if $v }}{{- $_ := set $s $field $v -}}{{- end -}}
{{- end -}}
{{- toJson $s -}}
{{- end -}}

{{/* Every tier the sizing can choose: the ladder, then the two catch-alls. */}}
{{- define "catchup.allTiers" -}}
{{- toJson (concat .Values.tiers (list .Values.unprofiledTier .Values.noProfileTier)) -}}
{{- end -}}

{{/* The `catchup` resource config (CatchupResource) this release implies, for the launchpad. */}}
{{- define "catchup.settings" -}}
{{- $tiers := list -}}
{{- range .Values.tiers -}}
{{- $tiers = append $tiers (include "catchup.tierConfig" . | fromJson) -}}
{{- end -}}
{{- $catalog := list -}}
{{- range .Values.catalog -}}
{{- $catalog = append $catalog (include "catchup.shapeConfig" . | fromJson) -}}
{{- end -}}
{{- $k8s := dict
  "namespace" (include "catchup.missionNamespace" .)
  "image" (include "catchup.image" .Values.workerImage)
  "image_pull_policy" .Values.workerImage.pullPolicy
  "worker_service_account" (include "catchup.workerServiceAccountName" .)
  "storage_mode" .Values.storageMode
  "storage_class" (.Values.storageClass | default "")
  "pvc_size" .Values.pvcSize
  "ephemeral_request" .Values.ephemeralRequest
  "ephemeral_limit" .Values.ephemeralLimit
  "cpu_limit" (.Values.cpuLimit | default "")
  "ttl_seconds_after_finished" .Values.ttlSecondsAfterFinished
  "tier_node_label" .Values.tierNodeLabel
  "tier_taint_key" .Values.tierTaintKey
  "configmap" (include "catchup.configmapName" .)
  "core_config_key" .Values.coreConfigKey
  "kubeconfig" ""
  "kubelet_preferred_address_types" .Values.kubelet.preferredAddressTypes
  "kubelet_ca_file" (.Values.kubelet.caFile | default "")
  "kubelet_insecure_skip_tls_verify" .Values.kubelet.insecureSkipTLSVerify
  "extra_node_selector" (.Values.extraNodeSelector | default dict)
-}}
{{- if not (kindIs "invalid" .Values.kubelet.concurrency) }}{{- $_ := set $k8s "kubelet_concurrency" .Values.kubelet.concurrency -}}{{- end -}}
{{- /* Unset (null) values are left out: the project's own default applies. */ -}}
{{- range $key, $field := dict "pooled" "pooled" "runAsNonRoot" "run_as_non_root" "runAsUser" "run_as_user" "clusterVersion" "cluster_version" -}}
{{- $v := index $.Values $key -}}
{{- if not (kindIs "invalid" $v) }}{{- $_ := set $k8s $field $v -}}{{- end -}}
{{- end -}}
{{- /* Tolerations as the resource's TolerationConfig spells them. */ -}}
{{- $tolerations := list -}}
{{- range .Values.extraTolerations -}}
{{- $t := dict -}}
{{- range $name, $v := . -}}
{{- $_ := set $t (ternary "toleration_seconds" $name (eq $name "tolerationSeconds")) $v -}}
{{- end -}}
{{- $tolerations = append $tolerations $t -}}
{{- end -}}
{{- $_ := set $k8s "extra_tolerations" $tolerations -}}
{{- /* The launchpad's mission_plan defaults and the caps a plan may not pass (MissionDefaultsConfig). */ -}}
{{- $missionDefaults := dict -}}
{{- range $key, $field := dict "parallelism" "parallelism" "maxParallelism" "max_parallelism" "maxRetireShare" "max_retire_share" -}}
{{- $v := index $.Values $key -}}
{{- if not (kindIs "invalid" $v) }}{{- $_ := set $missionDefaults $field $v -}}{{- end -}}
{{- end -}}
{{- /* A ledger number may be given as a number (`--set tipSource=60000000`): the resource takes a string. */ -}}
{{- $tip := .Values.tipSource | default "" -}}
{{- if not (kindIs "string" $tip) }}{{- $tip = $tip | int64 | toString -}}{{- end -}}
{{- $catchup := dict
  "storage_root" .Values.storageRoot
  "mission_defaults" $missionDefaults
  "work_dir" .Values.workDir
  "backend" "kubernetes"
  "kubernetes" $k8s
  "retry" (.Values.retry | default dict)
  "sizing" (.Values.sizing | default dict)
  "ladder" (.Values.ladder | default dict)
  "disk" (.Values.disk | default dict)
  "tiers" $tiers
  "unprofiled_tier" (include "catchup.tierConfig" .Values.unprofiledTier | fromJson)
  "no_profile_tier" (include "catchup.tierConfig" .Values.noProfileTier | fromJson)
  "tip_source" $tip
  "catalog" $catalog
  "catalog_source" (.Values.catalogSource | default "")
-}}
{{- if not (kindIs "invalid" .Values.tipTimeoutSeconds) }}{{- $_ := set $catchup "tip_timeout_seconds" .Values.tipTimeoutSeconds -}}{{- end -}}
{{- toJson $catchup -}}
{{- end -}}

{{/* The launchpad's run config: the same settings, and the mission's parallelism. */}}
{{- define "catchup.runConfig" -}}
{{- $catchup := include "catchup.settings" . | fromJson -}}
{{- $plan := dict -}}
{{- if not (kindIs "invalid" .Values.parallelism) }}{{- $_ := set $plan "parallelism" .Values.parallelism -}}{{- end -}}
{{- $cfg := dict "resources" (dict "catchup" (dict "config" $catchup)) "ops" (dict "mission_plan" (dict "config" $plan)) -}}
{{- toYaml $cfg -}}
{{- end -}}
