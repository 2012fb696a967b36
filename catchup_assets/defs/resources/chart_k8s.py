"""Kubernetes' own shapes as the chart's values schema checks them: names, label and annotation maps, pod fields.

Each pattern is the API server's format, as k8s.io/apimachinery/pkg/util/validation/validation.go
writes it (the constants are quoted in backends/kubernetes/settings.py, whose checks use them too).
Helm checks patterns as Go (RE2) regexps, which have no lookahead, so a length is its own keyword.
chart_only.py puts these where the chart's values hold such a thing.
"""

from catchup_assets.backends.kubernetes.settings import (
    CONFIGMAP_KEY_FMT,
    DEFAULT_NAMESPACE,
    DNS1123_LABEL_FMT,
    DNS1123_SUBDOMAIN_FMT,
    ENV_VAR_NAME_FMT,
    MAX_NAME,
    MAX_SUBDOMAIN,
    QUALIFIED_NAME_FMT,
    SYSTEM_NAMESPACES,
)

STRING = {"type": "string"}
# dns1123LabelFmt, at most 63: a namespace's name, a Service's, a tier's.
DNS_LABEL = {"type": "string", "minLength": 1, "maxLength": MAX_NAME, "pattern": f"^{DNS1123_LABEL_FMT}$"}
# dns1123SubdomainFmt, at most 253: a Secret's, a ConfigMap's, a ServiceAccount's, a StorageClass's name.
DNS_SUBDOMAIN = {"type": "string", "minLength": 1, "maxLength": MAX_SUBDOMAIN, "pattern": f"^{DNS1123_SUBDOMAIN_FMT}$"}
# A label or annotation key (IsQualifiedName): qualifiedNameFmt, at most 63, after an optional DNS-1123
# subdomain prefix (at most 253) and '/'. The `not` holds the two lengths.
LABEL_KEY = {
    "type": "string",
    "pattern": f"^({DNS1123_SUBDOMAIN_FMT}/)?{QUALIFIED_NAME_FMT}$",
    "not": {"pattern": f"^[^/]{{{MAX_SUBDOMAIN + 1},}}/|(^|/)[^/]{{{MAX_NAME + 1},}}$"},
}
LABEL_VALUE = {"type": "string", "maxLength": MAX_NAME, "pattern": f"^({QUALIFIED_NAME_FMT})?$"}  # labelValueFmt
# IsConfigMapKey: a ConfigMap's or a Secret's key; never ".", ".." or "..name".
CONFIGMAP_KEY = {
    "type": "string",
    "maxLength": MAX_SUBDOMAIN,
    "pattern": f"^{CONFIGMAP_KEY_FMT}$",
    "not": {"pattern": r"^\.(\.|$)"},
}
LABELS = {"type": "object", "propertyNames": LABEL_KEY, "additionalProperties": LABEL_VALUE}
ANNOTATIONS = {"type": "object", "propertyNames": LABEL_KEY, "additionalProperties": STRING}
ENV = {"type": "object", "propertyNames": {"pattern": f"^{ENV_VAR_NAME_FMT}$"}, "additionalProperties": STRING}


def optional(name: dict) -> dict:
    """A name, or empty (the chart then derives one)."""
    return {**name, "minLength": 0, "pattern": f"^({name['pattern'][1:-1]})?$"}


# A namespace the chart may put range Jobs in: never one Kubernetes keeps for itself, nor `default`
# (K8sSettings refuses them too).
NAMESPACE = {**DNS_LABEL, "not": {"enum": [*SYSTEM_NAMESPACES, DEFAULT_NAMESPACE]}}

# A resource quantity (resource.Quantity's serialized form, as the API's OpenAPI schema writes it), or a number.
QUANTITY_ANY = {
    "type": ["string", "number"],
    "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
}
_QUANTITIES = {"type": "object", "propertyNames": LABEL_KEY, "additionalProperties": QUANTITY_ANY}
RESOURCES = {  # ResourceRequirements
    "type": "object",
    "additionalProperties": False,
    "properties": {"requests": _QUANTITIES, "limits": _QUANTITIES},
}
TOLERATION = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "key": {"anyOf": [{"type": "string", "maxLength": 0}, LABEL_KEY]},
        "operator": {"enum": ["Equal", "Exists"]},
        "value": LABEL_VALUE,
        "effect": {"enum": ["", "NoSchedule", "PreferNoSchedule", "NoExecute"]},
        "tolerationSeconds": {"type": "integer", "maximum": 2**63 - 1},  # an int64
    },
}
# Affinity's three parts, each passed as it is (the API server checks them).
AFFINITY = {
    "type": "object",
    "additionalProperties": False,
    "properties": dict.fromkeys(("nodeAffinity", "podAffinity", "podAntiAffinity"), {"type": "object"}),
}
_SELECTOR_REQUIREMENT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["key", "operator"],
    "properties": {
        "key": LABEL_KEY,
        "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
        "values": {"type": "array", "items": LABEL_VALUE},
    },
}
LABEL_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"matchLabels": LABELS, "matchExpressions": {"type": "array", "items": _SELECTOR_REQUIREMENT}},
}
PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
CIDR = {"type": "string", "pattern": r"^[0-9a-fA-F:.]+/[0-9]{1,3}$"}
IP_BLOCK = {
    "type": "object",
    "additionalProperties": False,
    "required": ["cidr"],
    "properties": {"cidr": CIDR, "except": {"type": "array", "items": CIDR}},
}
# A NetworkPolicyEgressRule, as the Kubernetes API spells it.
EGRESS_RULE = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "to": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"ipBlock": IP_BLOCK, "namespaceSelector": LABEL_SELECTOR, "podSelector": LABEL_SELECTOR},
            },
        },
        "ports": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "protocol": {"enum": ["TCP", "UDP", "SCTP"]},
                    "port": {"anyOf": [PORT, {"type": "string", "minLength": 1, "maxLength": 15}]},
                    "endPort": PORT,
                },
            },
        },
    },
}
# Pods of a namespace, by the namespace's name and the pods' labels (never every pod of it).
PODS_IN = {
    "type": "object",
    "additionalProperties": False,
    "required": ["namespace", "podLabels"],
    "properties": {"namespace": DNS_LABEL, "podLabels": {**LABELS, "minProperties": 1}},
}
