"""What the chart's values schema says by hand: the chart's own values, and checks no field type can say.

chart_schema.py writes these into values.schema.json beside what it generates
from the resource's models. Nothing here names a resource field's type or
bound: those come from the field.
"""

from catchup_assets.backends.kubernetes.settings import ENTRYPOINT_KEY
from catchup_assets.core.plan.config import MAX_DURATION_SECONDS
from catchup_assets.core.web_url import BASE_URL_PATTERN, ORIGIN_PATTERN
from catchup_assets.defs.resources.chart_k8s import (
    AFFINITY,
    ANNOTATIONS,
    CONFIGMAP_KEY,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    EGRESS_RULE,
    ENV,
    IP_BLOCK,
    LABEL_KEY,
    LABEL_VALUE,
    LABELS,
    NAMESPACE,
    PODS_IN,
    PORT,
    RESOURCES,
    TOLERATION,
    optional,
)

# A quantity of bytes, never zero (K8sSettings refuses it; templates/_validate.tpl holds its upper bound).
QUANTITY = {
    "pattern": r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$",
    "not": {"pattern": r"^0+(\.0+)?[A-Za-z]*$"},
}
SHAPE_NAME = {"minLength": 1, "maxLength": 63, "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"}
ADDRESS_TYPES = ["Hostname", "InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS"]

DEFINITIONS = {
    "image": {
        "type": "object",
        "additionalProperties": False,
        "required": ["repository", "tag"],
        "properties": {
            "repository": {"type": "string", "minLength": 1, "pattern": r"^[^\s]+$"},
            "tag": {
                "description": "a tag other than latest, or a digest sha256:<64 hex> (also written @sha256:...)",
                "type": "string",
                "anyOf": [
                    {"pattern": "^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$", "not": {"const": "latest"}},
                    {"pattern": "^@?sha256:[a-f0-9]{64}$"},
                ],
            },
            "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
        },
    },
    "dnsLabel": DNS_LABEL,
    # Empty: "<release namespace>-missions".
    "namespaceName": optional(NAMESPACE),
    "capacityTypes": {"type": "array", "minItems": 1, "items": {"enum": ["spot", "on-demand", "reserved"]}},
}

# The chart's own values: no resource field holds them.
CHART_REQUIRED = ("image", "workerImage", "serviceAccount", "workerServiceAccount", "stellarCoreConfig",
                  "codeLocation", "karpenter", "monitoring", "networkPolicy")  # fmt: skip
DURATION = {"type": "string", "pattern": "^([0-9]+(ms|s|m|h|d|w|y))+$"}  # a Prometheus duration
# The alerts of monitoring.prometheusRule.for, each how long its condition holds before it fires.
_ALERT_FORS = ("stalled", "breakerTripped", "condemned", "unschedulable", "noCompletion")
# The chart sets the mission namespace's Pod Security labels itself: commonLabels may not override them.
_POD_SECURITY = {"not": {"pattern": "^pod-security\\.kubernetes\\.io/"}}
# Names the chart derives when empty; a ServiceAccount's is a DNS-1123 subdomain, kept to 63 as the chart's own.
_ACCOUNT = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"name": optional({**DNS_SUBDOMAIN, "maxLength": 63})},
}
_NAME_OVERRIDE = {**optional(DNS_LABEL), "maxLength": 40}
CHART_ONLY = {
    # A subchart's values may hold its parent's `global:` (Helm passes it down).
    "global": {"type": "object"},
    "image": {"$ref": "#/definitions/image"},
    "workerImage": {"$ref": "#/definitions/image"},
    "imagePullSecrets": {
        "type": "array",
        "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name"],
            "properties": {"name": DNS_SUBDOMAIN},
        },
    },
    "nameOverride": _NAME_OVERRIDE,
    "fullnameOverride": _NAME_OVERRIDE,
    "serviceAccount": {**_ACCOUNT, "properties": {**_ACCOUNT["properties"], "annotations": ANNOTATIONS}},
    "workerServiceAccount": _ACCOUNT,
    "commonLabels": {**LABELS, "propertyNames": {"allOf": [LABEL_KEY, _POD_SECURITY]}},
    # The Secret holding notify_sensor's Slack bot token: the code server's $SLACK_BOT_TOKEN.
    "slackTokenSecret": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"name": optional(DNS_SUBDOMAIN), "key": CONFIGMAP_KEY},
    },
    # The Secret whose keys are the storage root's credentials as env vars (AWS_ACCESS_KEY_ID, ...): the code
    # server's and the run pods' envFrom. storageRoot itself may hold none (templates/_validate.tpl).
    "storageCredentialsSecret": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"name": optional(DNS_SUBDOMAIN)},
    },
    # {name, create}; or the older form, a name alone: a namespace the operator made (create: false).
    "missionNamespace": {
        "oneOf": [
            {"$ref": "#/definitions/namespaceName"},
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {"name": {"$ref": "#/definitions/namespaceName"}, "create": {"type": "boolean"}},
            },
        ]
    },
    "networkPolicy": {
        "type": "object",
        "additionalProperties": False,
        "required": ["enabled", "dns", "archives", "codeServerClients", "metricsScrapers"],
        "properties": {
            "enabled": {"type": "boolean"},
            "dns": {"type": "array", "items": PODS_IN},
            "archives": {
                "type": "object",
                "additionalProperties": False,
                "required": ["ipBlocks", "ports"],
                "properties": {
                    "ipBlocks": {"type": "array", "items": IP_BLOCK},
                    # Never empty: a rule without ports allows every port.
                    "ports": {"type": "array", "items": PORT, "uniqueItems": True, "minItems": 1},
                },
            },
            "extraEgress": {"type": "array", "items": EGRESS_RULE},
            # The release namespace's fences: who reaches the code server, who scrapes the run pods.
            "codeServerClients": {"type": "array", "items": {**LABELS, "minProperties": 1}},
            "metricsScrapers": {"type": "array", "items": PODS_IN},
        },
    },
    "stellarCoreConfig": {"type": "string", "minLength": 1},
    "codeLocation": {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "port"],
        "properties": {
            "name": {"$ref": "#/definitions/dnsLabel"},
            "port": PORT,
            "replicas": {"type": "integer", "minimum": 0, "maximum": 100},
            "resources": RESOURCES,
            "nodeSelector": LABELS,
            "tolerations": {"type": "array", "items": TOLERATION},
            "affinity": AFFINITY,
            "podAnnotations": ANNOTATIONS,
            "env": ENV,
            # The code server's and the run pods' uid and gids; never root (the restricted profile).
            "securityContext": {
                "type": "object",
                "additionalProperties": False,
                "properties": dict.fromkeys(
                    ("runAsUser", "runAsGroup", "fsGroup"), {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}
                ),
            },
        },
    },
    # The mission console (templates/console.yaml), the flags of `catchup-assets console` it runs with.
    "console": {
        "type": "object",
        "additionalProperties": False,
        "required": ["enabled"],
        "properties": {
            "enabled": {"type": "boolean"},
            "port": PORT,
            "replicas": {"type": "integer", "minimum": 0, "maximum": 100},
            "tokenSecret": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"name": {"anyOf": [{"const": ""}, DNS_SUBDOMAIN]}, "key": CONFIGMAP_KEY},
            },
            "publicUrl": {"type": "string", "pattern": f"^$|{ORIGIN_PATTERN}"},
            "dagsterUrl": {"type": "string", "pattern": f"^$|{BASE_URL_PATTERN}"},
            "dagsterUiUrl": {"type": "string", "pattern": f"^$|{BASE_URL_PATTERN}"},
            "serviceAccountAnnotations": ANNOTATIONS,
            "resources": RESOURCES,
            "nodeSelector": LABELS,
            "tolerations": {"type": "array", "items": TOLERATION},
            "affinity": AFFINITY,
            "podAnnotations": ANNOTATIONS,
            "securityContext": {
                "type": "object",
                "additionalProperties": False,
                "properties": dict.fromkeys(
                    ("runAsUser", "runAsGroup", "fsGroup"), {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}
                ),
            },
        },
    },
    "karpenter": {
        "type": "object",
        "additionalProperties": False,
        "required": ["enabled"],
        "properties": {
            "enabled": {"type": "boolean"},
            "nodeClassRef": {
                "type": "object",
                "additionalProperties": False,
                "required": ["group", "kind", "name"],
                "properties": {
                    "group": {"type": "string"},
                    "kind": {"type": "string"},
                    "name": {"type": "string", "minLength": 1},
                },
            },
            "capacityTypes": {"$ref": "#/definitions/capacityTypes"},
            "consolidateAfter": {"type": "string", "pattern": "^(Never|([0-9]+(s|m|h))+)$"},
        },
    },
    "monitoring": {
        "type": "object",
        "additionalProperties": False,
        "required": ["podMonitor", "prometheusRule"],
        "properties": {
            "grafanaDashboard": {
                "type": "object",
                "additionalProperties": False,
                "required": ["enabled"],
                "properties": {"enabled": {"type": "boolean"}, "labels": LABELS},
            },
            "podMonitor": {
                "type": "object",
                "additionalProperties": False,
                "required": ["enabled", "interval"],
                "properties": {
                    "enabled": {"type": "boolean"},
                    "labels": LABELS,
                    "interval": DURATION,
                    "scrapeTimeout": {"anyOf": [{"type": "string", "maxLength": 0}, DURATION]},
                },
            },
            "prometheusRule": {
                "type": "object",
                "additionalProperties": False,
                "required": ["enabled", "noCompletionFactor", "for"],
                "properties": {
                    "enabled": {"type": "boolean"},
                    "labels": LABELS,
                    "ruleLabels": {**LABELS, "not": {"required": ["severity"]}},  # each alert sets its own
                    "unschedulableSeconds": {
                        "type": ["number", "null"],
                        "exclusiveMinimum": 0,
                        "maximum": MAX_DURATION_SECONDS,
                    },
                    "noCompletionFactor": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000},
                    "for": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": list(_ALERT_FORS),
                        "properties": dict.fromkeys(_ALERT_FORS, DURATION),
                    },
                },
            },
        },
    },
}

# Install-time checks a field's type does not say, merged into its generated schema, by values path.
CONSTRAINTS = {
    "storageRoot": {"minLength": 1},
    "workDir": {"pattern": "^/"},
    "pvcSize": QUANTITY,
    "ephemeralRequest": QUANTITY,
    "ephemeralLimit": QUANTITY,
    "cpuLimit": {"pattern": r"^([0-9]+(\.[0-9]+)?m?)?$", "not": {"pattern": r"^0+(\.0+)?m?$"}},  # empty: no limit
    "clusterVersion": {"pattern": r"^1\.(2[5-9]|[3-9][0-9]|[1-9][0-9]{2,})$"},  # 1.25 or later, as K8sSettings
    "coreConfigKey": {**CONFIGMAP_KEY, "not": {"anyOf": [CONFIGMAP_KEY["not"], {"const": ENTRYPOINT_KEY}]}},
    "storageClass": optional(DNS_SUBDOMAIN),
    "priorityClassName": optional(DNS_SUBDOMAIN),
    "tierNodeLabel": LABEL_KEY,
    "tierTaintKey": LABEL_KEY,
    "extraNodeSelector": {"propertyNames": LABEL_KEY, "additionalProperties": LABEL_VALUE},
    # The range pods' security: only what the restricted Pod Security Standard admits, as the mission
    # namespace the chart creates enforces it. (The code, run elsewhere, may be told otherwise.)
    "runAsNonRoot": {"const": True},
    "runAsUser": {"minimum": 1},
    "toleration.key": TOLERATION["properties"]["key"],
    "toleration.value": LABEL_VALUE,
    "kubelet.preferredAddressTypes": {"minItems": 1, "uniqueItems": True, "items": {"enum": ADDRESS_TYPES}},
    "kubelet.tokenFile": {"minLength": 1},  # KubeletAccess: a path
    "tier.name": DNS_LABEL,
    "tier.shape": SHAPE_NAME,
    "shape.name": SHAPE_NAME,
}
_PORT = "(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})"
# Values whose schema is not their field's: a ledger number may be given as a number (`--set tipSource=60000000`).
REPLACED = {
    "tipSource": {
        "description": "empty, a ledger number, or a history archive's http(s) URL (no credentials, query or fragment)",
        "oneOf": [
            {"type": "string", "maxLength": 0},
            {"type": "string", "pattern": "^[1-9][0-9]{0,9}$"},
            # A host (or [IPv6]) and a port urllib can read (0-65535): parse_tip_source refuses any other.
            {"type": "string", "pattern": rf"^https?://([^\s/?#@:\[\]]+|\[[0-9A-Fa-f:.]+\])(:{_PORT})?(/[^\s?#]*)?$"},
            {"type": "integer", "minimum": 1, "maximum": 4294967295},
        ],
    },
}
# Whole-object checks, and the chart's own keys inside a generated object.
OBJECT_EXTRAS = {
    "tier": {
        "anyOf": [{"required": ["shape"]}, {"required": ["nodeMemoryGib"]}],
        # The tier's NodePool may buy these (karpenter); the resource's TierConfig never sees them.
        "properties": {"capacityTypes": {"$ref": "#/definitions/capacityTypes"}},
    },
    "kubelet": {
        "not": {
            "required": ["caFile", "insecureSkipTLSVerify"],
            "properties": {"caFile": {"minLength": 1}, "insecureSkipTLSVerify": {"const": True}},
        }
    },
}
