"""What the chart's values schema says by hand: the chart's own values, and checks no field type can say.

chart_schema.py writes these into values.schema.json beside what it generates
from the resource's models. Nothing here names a resource field's type or
bound: those come from the field.
"""

from catchup_assets.backends.kubernetes.settings import ENTRYPOINT_KEY

QUANTITY = {"pattern": r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"}
DNS_LABEL = {"minLength": 1, "maxLength": 63, "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}
SHAPE_NAME = {"minLength": 1, "maxLength": 63, "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"}
LABEL_KEY = {"minLength": 1, "pattern": r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"}
LABEL_VALUE = {"type": "string", "maxLength": 63, "pattern": r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$"}
ADDRESS_TYPES = ["Hostname", "InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS"]

DEFINITIONS = {
    "image": {
        "type": "object",
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
    "dnsLabel": {"type": "string", **DNS_LABEL},
    "namespaceName": {"oneOf": [{"type": "string", "maxLength": 0}, {"$ref": "#/definitions/dnsLabel"}]},
    "capacityTypes": {"type": "array", "minItems": 1, "items": {"enum": ["spot", "on-demand", "reserved"]}},
}

# The chart's own values: no resource field holds them.
CHART_REQUIRED = ("image", "workerImage", "serviceAccount", "workerServiceAccount", "stellarCoreConfig",
                  "codeLocation", "karpenter", "monitoring", "networkPolicy")  # fmt: skip
_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
# Labels the chart puts on objects (the Prometheus Operator's selectors match them).
_LABELS = {"type": "object", "propertyNames": LABEL_KEY, "additionalProperties": LABEL_VALUE}
DURATION = {"type": "string", "pattern": "^([0-9]+(ms|s|m|h|d|w|y))+$"}  # a Prometheus duration
# The alerts of monitoring.prometheusRule.for, each how long its condition holds before it fires.
_ALERT_FORS = ("stalled", "breakerTripped", "condemned", "unschedulable", "noCompletion")
_PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
_CIDR = {"type": "string", "pattern": r"^[0-9a-fA-F:.]+/[0-9]{1,3}$"}
_IP_BLOCK = {
    "type": "object",
    "additionalProperties": False,
    "required": ["cidr"],
    "properties": {"cidr": _CIDR, "except": {"type": "array", "items": _CIDR}},
}
# The chart sets the mission namespace's Pod Security labels itself: commonLabels may not override them.
_POD_SECURITY = {"not": {"pattern": "^pod-security\\.kubernetes\\.io/"}}
CHART_ONLY = {
    "image": {"$ref": "#/definitions/image"},
    "workerImage": {"$ref": "#/definitions/image"},
    "imagePullSecrets": {"type": "array", "items": {"type": "object", "required": ["name"]}},
    "nameOverride": {"type": "string", "maxLength": 40},
    "fullnameOverride": {"type": "string", "maxLength": 40},
    "serviceAccount": {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 63}, "annotations": _STRINGS},
    },
    "workerServiceAccount": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"name": {"type": "string", "maxLength": 63}},
    },
    "commonLabels": {**_STRINGS, "propertyNames": _POD_SECURITY},
    # The Secret holding notify_sensor's Slack bot token: the code server's $SLACK_BOT_TOKEN.
    "slackTokenSecret": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"name": {"type": "string", "maxLength": 253}, "key": {"type": "string", "minLength": 1}},
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
        "required": ["enabled", "dns", "archives"],
        "properties": {
            "enabled": {"type": "boolean"},
            "dns": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["namespace", "podLabels"],
                    "properties": {
                        "namespace": {"$ref": "#/definitions/dnsLabel"},
                        "podLabels": {**_LABELS, "minProperties": 1},  # never every pod of the namespace
                    },
                },
            },
            "archives": {
                "type": "object",
                "additionalProperties": False,
                "required": ["ipBlocks", "ports"],
                "properties": {
                    "ipBlocks": {"type": "array", "items": _IP_BLOCK},
                    # Never empty: a rule without ports allows every port.
                    "ports": {"type": "array", "items": _PORT, "uniqueItems": True, "minItems": 1},
                },
            },
            # NetworkPolicyEgressRule objects, passed as they are (the API server checks them).
            "extraEgress": {"type": "array", "items": {"type": "object"}},
        },
    },
    "stellarCoreConfig": {"type": "string", "minLength": 1},
    "codeLocation": {
        "type": "object",
        "required": ["name", "port"],
        "properties": {
            "name": {"$ref": "#/definitions/dnsLabel"},
            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
            "replicas": {"type": "integer", "minimum": 0},
            "resources": {"type": "object"},
            "nodeSelector": _STRINGS,
            "tolerations": {"type": "array", "items": {"type": "object"}},
            "affinity": {"type": "object"},
            "podAnnotations": _STRINGS,
            "env": _STRINGS,
            "securityContext": {
                "type": "object",
                "properties": {
                    "runAsUser": {"type": "integer", "minimum": 1},
                    "runAsGroup": {"type": "integer", "minimum": 1},
                    "fsGroup": {"type": "integer", "minimum": 1},
                },
            },
        },
    },
    "karpenter": {
        "type": "object",
        "required": ["enabled"],
        "properties": {
            "enabled": {"type": "boolean"},
            "nodeClassRef": {
                "type": "object",
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
            "podMonitor": {
                "type": "object",
                "additionalProperties": False,
                "required": ["enabled", "interval"],
                "properties": {
                    "enabled": {"type": "boolean"},
                    "labels": _LABELS,
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
                    "labels": _LABELS,
                    "ruleLabels": {**_LABELS, "not": {"required": ["severity"]}},  # each alert sets its own
                    "unschedulableSeconds": {"type": ["number", "null"], "exclusiveMinimum": 0},
                    "noCompletionFactor": {"type": "number", "exclusiveMinimum": 0},
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
    "cpuLimit": {"pattern": r"^([0-9]+(\.[0-9]+)?m?)?$"},  # empty: no CPU limit
    "clusterVersion": {"pattern": r"^1\.[0-9]+$"},
    "coreConfigKey": {"pattern": "^[-._a-zA-Z0-9]{1,253}$", "not": {"const": ENTRYPOINT_KEY}},
    "tierNodeLabel": LABEL_KEY,
    "tierTaintKey": LABEL_KEY,
    "extraNodeSelector": {"propertyNames": LABEL_KEY, "additionalProperties": LABEL_VALUE},
    "kubelet.preferredAddressTypes": {"minItems": 1, "uniqueItems": True, "items": {"enum": ADDRESS_TYPES}},
    "tier.name": DNS_LABEL,
    "tier.shape": SHAPE_NAME,
    "shape.name": SHAPE_NAME,
}
# Values whose schema is not their field's: a ledger number may be given as a number (`--set tipSource=60000000`).
REPLACED = {
    "tipSource": {
        "description": "empty, a ledger number, or a history archive's http(s) URL (no credentials, query or fragment)",
        "oneOf": [
            {"type": "string", "maxLength": 0},
            {"type": "string", "pattern": "^[1-9][0-9]{0,9}$"},
            {"type": "string", "pattern": r"^https?://[^\s/?#@]+(/[^\s?#]*)?$"},
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
