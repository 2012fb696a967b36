{{/* What the code location would refuse at load and values.schema.json cannot say: a rule over two
values, or a message that says what to do (issue 45 item 5). configmap.yaml includes "catchup.validate",
so `helm template` and `helm install` fail here, naming the values key, before anything is installed.
Each rule is the code's own (named beside it); files/rules.json, generated with the schema, holds the
defaults a null value takes and the code's limits, so no number here is the template's own. */}}

{{/* A Kubernetes quantity as the schema admits it (digits, a fraction, a binary or decimal suffix) as a
number: bytes, or CPUs for a plain number or millicores. */}}
{{- define "catchup.quantity" -}}
{{- $q := toString . -}}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $q -}}
{{- $suffix := trimPrefix $number $q -}}
{{- $factors := dict "" 1.0 "m" 0.001 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 -}}
{{- mulf (float64 $number) (get $factors $suffix) -}}
{{- end -}}

{{- define "catchup.validate" -}}
{{- $rules := .Files.Get "files/rules.json" | fromJson -}}
{{- $v := .Values -}}
{{- /* Each value a rule compares, or its default (files/rules.json) when it is null or left out. */ -}}
{{- $eff := dict -}}
{{- range $key, $default := $rules.defaults -}}
{{- $value := index $v $key -}}
{{- $_ := set $eff $key (kindIs "invalid" $value | ternary $default $value) -}}
{{- end -}}

{{- /* storageRoot: the code location's ConfigMap and every run pod's env carry it, so a credential in it
would be readable by anyone who reads those. (core/redact.py's words for what a URL may hide.) */ -}}
{{- $root := toString $v.storageRoot -}}
{{- /* Any '@' before the query: a secret key holds '/' often, and pasted raw it ends the host early. */ -}}
{{- if regexMatch "^[A-Za-z][A-Za-z0-9+.-]*://[^?#]*@" $root -}}
{{- fail "storageRoot: holds credentials (user:password@ before the host); the chart would render them into a ConfigMap. Put them in a Secret (e.g. keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, which s3fs reads) and name it in storageCredentialsSecret.name, or give the mission's ServiceAccount a cloud identity (serviceAccount.annotations)" -}}
{{- end -}}
{{- if regexMatch "(?i)[?&](x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|x-goog-credential|sig|signature|token|access_token)=" $root -}}
{{- fail "storageRoot: holds a presigned signature or token in its query; the chart would render it into a ConfigMap. Give the root without a query and its credentials in a Secret named in storageCredentialsSecret.name (its keys become the pods' env, e.g. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)" -}}
{{- end -}}

{{- /* MissionDefaultsConfig: parallelism <= max_parallelism. */ -}}
{{- $par := $eff.parallelism | float64 -}}
{{- $max := $eff.maxParallelism | float64 -}}
{{- if gt $par $max -}}
{{- fail (printf "parallelism (%v) must be <= maxParallelism (%v): raise maxParallelism, or ask for fewer attempts in flight" $par $max) -}}
{{- end -}}

{{- /* MissionDefaultsConfig's span, as MissionSpan checks it: the launchpad's defaults must make a plan. */ -}}
{{- $first := $eff.firstLedger | int64 -}}
{{- $last := $eff.lastLedger | int64 -}}
{{- $per := $eff.ledgersPerRange | int64 -}}
{{- $overlap := $eff.overlap | int64 -}}
{{- $checkpoint := $rules.limits.checkpointLedgers | int64 -}}
{{- if and (gt $last 0) (lt $last $first) -}}
{{- fail (printf "lastLedger (%d) must be >= firstLedger (%d), or 0 (no default tip)" $last $first) -}}
{{- end -}}
{{- if ne (mod $per $checkpoint) 0 -}}
{{- fail (printf "ledgersPerRange (%d) must be a multiple of %d (a checkpoint)" $per $checkpoint) -}}
{{- end -}}
{{- if ge $overlap $per -}}
{{- fail (printf "overlap (%d) must be below ledgersPerRange (%d)" $overlap $per) -}}
{{- end -}}
{{- $end := ternary $last $first (gt $last 0) -}}
{{- $ranges := add1 (sub (div (sub $end 1) $per) (div (sub $first 1) $per)) -}}
{{- if gt $ranges ($rules.limits.maxRanges | int64) -}}
{{- fail (printf "ledgersPerRange (%d) cuts firstLedger..lastLedger into %d ranges, more than %d" $per $ranges ($rules.limits.maxRanges | int64)) -}}
{{- end -}}

{{- /* K8sSettings: ephemeral_request <= ephemeral_limit, and every size within what a volume holds. */ -}}
{{- $most := $rules.limits.maxDiskBytes | float64 -}}
{{- range $key := list "pvcSize" "ephemeralRequest" "ephemeralLimit" -}}
{{- $q := index $eff $key -}}
{{- if gt (include "catchup.quantity" $q | float64) $most -}}
{{- fail (printf "%s (%s) is past the most one volume holds (64Ti)" $key $q) -}}
{{- end -}}
{{- end -}}
{{- $request := $eff.ephemeralRequest -}}
{{- $limit := $eff.ephemeralLimit -}}
{{- if gt (include "catchup.quantity" $request | float64) (include "catchup.quantity" $limit | float64) -}}
{{- fail (printf "ephemeralRequest (%s) must be <= ephemeralLimit (%s)" $request $limit) -}}
{{- end -}}
{{- $cpuLimit := $eff.cpuLimit | default "" -}}
{{- if and $cpuLimit (gt (include "catchup.quantity" $cpuLimit | float64) ($rules.limits.maxNodeCpu | float64)) -}}
{{- fail (printf "cpuLimit (%s) is past the most CPUs one node has (%v)" $cpuLimit $rules.limits.maxNodeCpu) -}}
{{- end -}}

{{- /* WaitPolicy: api_wait_cap_seconds <= api_wait_budget_seconds. */ -}}
{{- $cap := $eff.apiWaitCapSeconds | float64 -}}
{{- $budget := $eff.apiWaitBudgetSeconds | float64 -}}
{{- if gt $cap $budget -}}
{{- fail (printf "apiWaitCapSeconds (%v) must be <= apiWaitBudgetSeconds (%v): no wait that long could be spent" $cap $budget) -}}
{{- end -}}

{{- /* K8sSettings: the tier label is the backend's own node selector. */ -}}
{{- $tierLabel := $eff.tierNodeLabel -}}
{{- if hasKey ($v.extraNodeSelector | default dict) $tierLabel -}}
{{- fail (printf "extraNodeSelector: %s is tierNodeLabel, which each range pod's tier sets" $tierLabel) -}}
{{- end -}}

{{- /* K8sSettings' check_toleration: none without a key unless Exists, and the broad ones only by opt-in. */ -}}
{{- $broad := $eff.allowBroadTolerations -}}
{{- range $i, $t := $v.extraTolerations | default list -}}
{{- $key := $t.key | default "" -}}
{{- $exists := eq ($t.operator | default "Equal") "Exists" -}}
{{- if and (not $key) (not $exists) -}}
{{- fail (printf "extraTolerations[%d]: has no key; a toleration without one needs operator Exists (and then matches every taint)" $i) -}}
{{- end -}}
{{- if and (not $broad) (not $key) -}}
{{- fail (printf "extraTolerations[%d]: matches every taint (no key, operator Exists), control-plane nodes' too: set allowBroadTolerations: true to mean it" $i) -}}
{{- end -}}
{{- if and (not $broad) (has $key $rules.controlPlaneTaints) -}}
{{- fail (printf "extraTolerations[%d]: tolerates the control-plane taint %s: set allowBroadTolerations: true to mean it" $i $key) -}}
{{- end -}}
{{- end -}}

{{- /* Tiers (core/size/sizing.py Tiers, TierConfig): cuts strictly increase, names are unique, a cut
fits its node, exclusive is one range per node. */ -}}
{{- $previous := -1.0 -}}
{{- range $i, $t := $v.tiers -}}
{{- if le ($t.memoryCutGib | float64) $previous -}}
{{- fail (printf "tiers[%d] (%s): memoryCutGib %v must be above the tier before's (%v): the ladder's cuts strictly increase" $i $t.name $t.memoryCutGib $previous) -}}
{{- end -}}
{{- $previous = $t.memoryCutGib | float64 -}}
{{- end -}}
{{- $names := list -}}
{{- $where := list -}}
{{- range $i, $t := $v.tiers }}{{ $where = append $where (list (printf "tiers[%d]" $i) $t) }}{{ end -}}
{{- $where = append $where (list "unprofiledTier" $v.unprofiledTier) -}}
{{- $where = append $where (list "noProfileTier" $v.noProfileTier) -}}
{{- range $pair := $where -}}
{{- $place := index $pair 0 }}{{ $t := index $pair 1 -}}
{{- if has $t.name $names -}}
{{- fail (printf "%s: tier name %s is taken by another tier (tiers, unprofiledTier and noProfileTier are one set)" $place $t.name) -}}
{{- end -}}
{{- $names = append $names $t.name -}}
{{- if and (not (kindIs "invalid" $t.nodeMemoryGib)) (gt ($t.memoryCutGib | float64) ($t.nodeMemoryGib | float64)) -}}
{{- fail (printf "%s (%s): memoryCutGib %v must be <= nodeMemoryGib %v" $place $t.name $t.memoryCutGib $t.nodeMemoryGib) -}}
{{- end -}}
{{- if and $t.exclusive (not (kindIs "invalid" $t.podsPerNode)) (ne ($t.podsPerNode | int) 1) -}}
{{- fail (printf "%s (%s): exclusive means one range per node, not podsPerNode %v" $place $t.name $t.podsPerNode) -}}
{{- end -}}
{{- end -}}

{{- /* The catalog (ShapeConfig, NodeShape, Catalog): unique names, allocatable within the shape, each
shape as the code resolves it (allocatable, when left out, estimated as catalog.eks_allocatable does). */ -}}
{{- $gib := 1073741824.0 -}}
{{- $a := $rules.allocatable -}}
{{- $catalog := list -}}
{{- range $i, $s := $v.catalog | default list -}}
{{- range $c := $catalog }}{{ if eq $c.name $s.name -}}
{{- fail (printf "catalog[%d]: shape name %s is listed twice" $i $s.name) -}}
{{- end }}{{ end -}}
{{- $memory := mulf ($s.memoryGib | float64) $gib | int64 -}}
{{- $allocMemory := 0 | int64 -}}
{{- if kindIs "invalid" $s.allocatableMemoryGib -}}
{{- $pods := kindIs "invalid" $s.maxPods | ternary 110 $s.maxPods | int64 -}}
{{- $capacity := mulf $memory (subf 1 $a.vmMemoryOverhead) | int64 -}}
{{- $reserved := add (mul (add ($a.kubeReservedMiB | int64) (mul ($a.kubeReservedMiBPerPod | int64) $pods)) 1048576) ($a.evictionHardBytes | int64) -}}
{{- $allocMemory = sub $capacity $reserved -}}
{{- else -}}
{{- $allocMemory = mulf ($s.allocatableMemoryGib | float64) $gib | int64 -}}
{{- end -}}
{{- $allocCpu := 0.0 -}}
{{- if kindIs "invalid" $s.allocatableCpu -}}
{{- $reservedCpu := 0.0 -}}
{{- range $core := until ($s.cpu | int) -}}
{{- $share := lt $core (len $a.cpuReservedFirst) | ternary (index $a.cpuReservedFirst (min $core (sub (len $a.cpuReservedFirst) 1))) $a.cpuReservedRest -}}
{{- $reservedCpu = addf $reservedCpu $share -}}
{{- end -}}
{{- $allocCpu = round (subf ($s.cpu | float64) $reservedCpu) 4 -}}
{{- else -}}
{{- $allocCpu = $s.allocatableCpu | float64 -}}
{{- end -}}
{{- if or (le $allocMemory 0) (gt $allocMemory $memory) -}}
{{- fail (printf "catalog[%d] (%s): need 0 < allocatable memory <= memoryGib (allocatableMemoryGib, or what maxPods leaves)" $i $s.name) -}}
{{- end -}}
{{- if or (le $allocCpu 0.0) (gt $allocCpu ($s.cpu | float64)) -}}
{{- fail (printf "catalog[%d] (%s): need 0 < allocatableCpu <= cpu %v" $i $s.name $s.cpu) -}}
{{- end -}}
{{- $catalog = append $catalog (dict "name" $s.name "memoryBytes" $memory "allocatableMemoryBytes" $allocMemory "allocatableCpu" $allocCpu "onDemandHourly" ($s.onDemandHourly | float64)) -}}
{{- end -}}
{{- if not $catalog }}{{ $catalog = $rules.defaultCatalog }}{{ end -}}

{{- /* Each tier on its node (sizing.resolve_shape): the shape it names is in the catalog and of its
nodeMemoryGib, or a shape of that memory holds its cpu; its slots' cuts and CPUs fit what the node gives pods. */ -}}
{{- range $pair := $where -}}
{{- $place := index $pair 0 }}{{ $t := index $pair 1 -}}
{{- $found := dict -}}
{{- if $t.shape -}}
{{- range $c := $catalog }}{{ if eq $c.name $t.shape }}{{ $found = $c }}{{ end }}{{ end -}}
{{- if not $found -}}
{{- fail (printf "%s (%s): shape %s is not in the catalog (catalog, or the default's c6i/m6i/r6i large to 8xlarge)" $place $t.name $t.shape) -}}
{{- end -}}
{{- if and (not (kindIs "invalid" $t.nodeMemoryGib)) (ne (mulf ($t.nodeMemoryGib | float64) $gib | int64) ($found.memoryBytes | int64)) -}}
{{- fail (printf "%s (%s): nodeMemoryGib %v is not shape %s's memory" $place $t.name $t.nodeMemoryGib $t.shape) -}}
{{- end -}}
{{- else -}}
{{- $memory := mulf ($t.nodeMemoryGib | float64) $gib | int64 -}}
{{- range $c := $catalog -}}
{{- if and (eq ($c.memoryBytes | int64) $memory) (ge ($c.allocatableCpu | float64) ($t.cpu | float64)) -}}
{{- if or (not $found) (lt ($c.onDemandHourly | float64) ($found.onDemandHourly | float64)) }}{{ $found = $c }}{{ end -}}
{{- end -}}
{{- end -}}
{{- if not $found -}}
{{- fail (printf "%s (%s): no catalog shape has %v GiB and %v allocatable CPUs; name one with shape, or add it to catalog" $place $t.name $t.nodeMemoryGib $t.cpu) -}}
{{- end -}}
{{- end -}}
{{- $slots := 1 | int64 -}}
{{- if and (not $t.exclusive) (not (kindIs "invalid" $t.podsPerNode)) }}{{ $slots = $t.podsPerNode | int64 }}{{ end -}}
{{- $cut := mulf ($t.memoryCutGib | float64) $gib | int64 -}}
{{- if gt (mul $cut $slots) ($found.allocatableMemoryBytes | int64) -}}
{{- fail (printf "%s (%s): %d x memoryCutGib %v exceeds what %s can give pods (%.4g GiB allocatable)" $place $t.name $slots $t.memoryCutGib $found.name (divf ($found.allocatableMemoryBytes | float64) $gib)) -}}
{{- end -}}
{{- if gt (mulf ($t.cpu | float64) $slots) ($found.allocatableCpu | float64) -}}
{{- fail (printf "%s (%s): %d x cpu %v exceeds %s's %v allocatable" $place $t.name $slots $t.cpu $found.name $found.allocatableCpu) -}}
{{- end -}}
{{- end -}}
{{- end -}}
