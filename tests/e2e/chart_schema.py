"""values.schema.json for deploy/helm/pyrocketmq, generated from the services' pydantic settings classes.

The `<component>.config` sections list exactly the settings fields (types, enums, ranges, descriptions from
NamesrvSettings, BrokerSettings, GatewaySettings and, once the controller service is in the workspace,
mq_controller's ControllerSettings); the rest of the schema is written out here. Regenerate after
a settings change with ``uv run --frozen --group e2e python tests/e2e/chart_schema.py`` (test_chart_values.py
fails while the committed file differs).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from mq_broker.settings import BrokerSettings
from mq_common.auth.model import Action
from mq_gateway.settings import GatewaySettings
from mq_namesrv.settings import NamesrvSettings
from pydantic_settings import BaseSettings

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "pyrocketmq"
SCHEMA_PATH = CHART / "values.schema.json"
SETTINGS: dict[str, type[BaseSettings]] = {
    "namesrv": NamesrvSettings,
    "broker": BrokerSettings,
    "gateway": GatewaySettings,
}
# The controller's settings class (services/controller), read when that workspace member is installed; until then
# `controller.config` takes any MQ_CONTROLLER_<FIELD> name (the service checks its own environment at start).
CONTROLLER_SETTINGS_CLASS = ("mq_controller.settings", "ControllerSettings")


def controller_settings() -> type[BaseSettings] | None:
    """mq_controller.settings.ControllerSettings when the package is importable, else None."""
    module_name, class_name = CONTROLLER_SETTINGS_CLASS
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError:
        return None
    cls: type[BaseSettings] = getattr(module, class_name)
    return cls


_CONTROLLER_SETTINGS = controller_settings()
if _CONTROLLER_SETTINGS is not None:
    SETTINGS["controller"] = _CONTROLLER_SETTINGS
# Ranges the validation template checks itself, with a message naming the rule.
TEMPLATE_CHECKED = {"broker": {"sync_flush_timeout_ms"}}

# ACL 2.0 action names as mqadmin takes them (Pub, Sub, ..., All); Any is a request-side action only.
_ACTIONS = tuple(a.value for a in Action if a.value != "Any")
_INT = {"type": "integer"}
_STR = {"type": "string"}
_BOOL = {"type": "boolean"}
_MAP = {"type": "object"}
_LIST = {"type": "array"}
_PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
_QUANTITY = {"type": ["string", "number"]}
_RESOURCES = {
    "type": "object",
    "required": ["requests", "limits"],
    "properties": {
        "requests": {
            "type": "object",
            "required": ["cpu", "memory"],
            "properties": {"cpu": _QUANTITY, "memory": _QUANTITY},
        },
        "limits": {
            "type": "object",
            "required": ["cpu", "memory"],
            "properties": {"cpu": _QUANTITY, "memory": _QUANTITY},
        },
    },
}
_PROBE = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "periodSeconds": {"type": "integer", "minimum": 1},
        "failureThreshold": {"type": "integer", "minimum": 1},
    },
}
_PDB = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"enabled": _BOOL, "maxUnavailable": {"type": ["integer", "string"]}},
}


def config_schema(component: str) -> dict[str, Any]:
    """JSON schema of `<component>.config`: one property per settings field, nothing else."""
    js = SETTINGS[component].model_json_schema()
    defs = js.get("$defs", {})
    props: dict[str, Any] = {}
    for name, raw in js["properties"].items():
        prop = {k: v for k, v in raw.items() if k not in ("title", "default")}
        if "$ref" in prop:
            ref = defs[prop.pop("$ref").split("/")[-1]]
            prop.update({k: v for k, v in ref.items() if k in ("enum", "type")})
        if prop.get("format") == "path":
            del prop["format"]
        if prop.get("type") == "array":  # StrList: a YAML list or one ','-separated string
            prop = {"description": prop["description"], "anyOf": [{"type": "array", "items": _STR}, _STR]}
        if name in TEMPLATE_CHECKED.get(component, set()):
            prop = {
                "type": prop["type"],
                "description": prop["description"] + " Range checked by templates/validate.yaml.",
            }
        props[name] = prop
    return {"type": "object", "additionalProperties": False, "properties": props}


def _scheduling() -> dict[str, Any]:
    return {
        "podAnnotations": _MAP,
        "podLabels": _MAP,
        "nodeSelector": _MAP,
        "tolerations": _LIST,
        "affinity": _MAP,
        "podAntiAffinityPreset": {"enum": ["soft", "hard", ""]},
        "topologySpreadConstraints": _LIST,
        "priorityClassName": _STR,
        "terminationGracePeriodSeconds": {"type": "integer", "minimum": 0},
        "startupProbe": _PROBE,
        "readinessProbe": _PROBE,
        "livenessProbe": _PROBE,
        "pdb": _PDB,
        "resources": _RESOURCES,
    }


def _component(component: str, extra: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["port", "config", "resources", *required],
        "properties": {"port": _PORT, "config": _config(component), **_scheduling(), **extra},
    }


def _config(component: str) -> dict[str, Any]:
    """`<component>.config`: from the settings class; the controller's is open while its class is absent."""
    if component in SETTINGS:
        return config_schema(component)
    return {
        "type": "object",
        "description": "MQ_CONTROLLER_<FIELD> settings (snake_case); checked by mqcontroller at start.",
        "propertyNames": {"pattern": "^[a-z][a-z0-9_]*$"},
    }


def _controller() -> dict[str, Any]:
    """controller.*: the RocketMQ 5 controller Deployment; `enabled` null = on when groups have several pods."""
    extra = {"enabled": {"type": ["boolean", "null"]}, "replicas": {"type": "integer", "minimum": 1}}
    return _component("controller", extra, ["replicas"])


def _etcd() -> dict[str, Any]:
    """etcd.*: the controller's state store, a StatefulSet of an odd number of members (validate.yaml checks odd)."""
    props = {
        "replicas": {"type": "integer", "minimum": 1},
        "clientPort": _PORT,
        "peerPort": _PORT,
        "metricsPort": _PORT,
        "quotaBackendBytes": {"type": "integer", "minimum": 134217728},
        "autoCompactionRetention": {"type": "integer", "minimum": 1},
        "persistence": _persistence(),
        **_scheduling(),
    }
    required = ["replicas", "clientPort", "peerPort", "metricsPort", "persistence", "resources"]
    return {"type": "object", "additionalProperties": False, "required": required, "properties": props}


def _persistence() -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "storageClass": _STR,
            "size": {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|K|M|G|T|P)?$"},
            "accessModes": {
                "type": "array",
                "minItems": 1,
                "items": {"enum": ["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"]},
            },
            "annotations": _MAP,
            "retentionPolicy": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "whenDeleted": {"enum": ["Retain", "Delete"]},
                    "whenScaled": {"enum": ["Retain", "Delete"]},
                },
            },
        },
    }


def _monitor() -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {"enabled": _BOOL, "interval": _STR, "scrapeTimeout": _STR, "labels": _MAP},
    }


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        out["required"] = required
    return out


_SECRET_NAME = {"type": "string", "pattern": "^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$", "maxLength": 253}
_COMPONENTS = ("namesrv", "broker", "gateway", "admin", "controller", "etcd")
_BROKER_ROLES = ["ASYNC_MASTER", "SYNC_MASTER"]


def _tls() -> dict[str, Any]:
    """tls.*: on by default; certificates from cert-manager, existing Secrets, or generated by the chart."""
    issuer = _obj({"name": _STR, "kind": {"enum": ["Issuer", "ClusterIssuer"]}, "group": _STR})
    cert_manager = _obj(
        {
            "enabled": _BOOL,
            "issuerRef": issuer,
            "duration": {"type": "string", "pattern": "^([0-9]+(h|m|s))+$"},
            "renewBefore": {"type": "string", "pattern": "^([0-9]+(h|m|s))+$"},
            "gatewayDnsNames": {"type": "array", "items": _STR},
        }
    )
    days = {"type": "integer", "minimum": 1}
    renew = {"type": "integer", "minimum": 0}
    generated = _obj({"caValidityDays": days, "validityDays": days, "renewBeforeDays": renew})
    existing = _obj(dict.fromkeys(_COMPONENTS, _SECRET_NAME))
    existing["description"] = "Secrets of the components' certificates: all of them, or none (the chart generates them)"
    return _obj(
        {
            "enabled": {
                **_BOOL,
                "description": "TLS everywhere; certificates from certManager, existingSecrets, or else generated",
            },
            "mountPath": {"type": "string", "pattern": "^/"},
            "gatewayClientAuth": {"enum": ["none", "optional"]},
            "identities": _obj(dict.fromkeys(_COMPONENTS, _STR)),
            "certManager": cert_manager,
            "existingSecrets": existing,
            "generated": generated,
        },
        ["enabled"],
    )


def _auth() -> dict[str, Any]:
    """auth.*: on by default; the Secret of the init user and inner credentials; users/ACLs of the bootstrap Job."""
    user = _obj(
        {
            "username": {"type": "string", "minLength": 1},
            "passwordSecret": _obj({"name": _SECRET_NAME, "key": {"type": "string", "minLength": 1}}, ["name", "key"]),
            "userType": {"enum": ["Normal", "Super"]},
        },
        ["username", "passwordSecret"],
    )
    names = {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}}
    acl = _obj(
        {
            "subject": {"type": "string", "pattern": "^User:.+"},
            "resources": names,
            "actions": {"type": "array", "minItems": 1, "items": {"enum": list(_ACTIONS)}},
            "decision": {"enum": ["Allow", "Deny"]},
            "sourceIps": {"type": "array", "items": _STR},
        },
        ["subject", "resources", "actions", "decision"],
    )
    bootstrap = _obj(
        {
            "backoffLimit": {"type": "integer", "minimum": 0},
            "activeDeadlineSeconds": {"type": "integer", "minimum": 60},
            "resources": _RESOURCES,
        }
    )
    keys = {"type": "string", "pattern": "^[-._a-zA-Z0-9]+$"}
    return _obj(
        {
            "enabled": {**_BOOL, "description": "ACL 2.0; credentials from existingSecret, or else generated"},
            "existingSecret": {
                **_SECRET_NAME,
                "description": "Secret of the init super user and inner credentials; empty: <fullname>-auth, generated",
            },
            "secretKeys": _obj({"initAuthenticationUser": keys, "innerClientAuthenticationCredentials": keys}),
            "users": {"type": "array", "items": user},
            "acls": {"type": "array", "items": acl},
            "bootstrap": bootstrap,
        },
        ["enabled"],
    )


def build_schema() -> dict[str, Any]:
    """The whole values.schema.json document."""
    group = {
        "type": "object",
        "additionalProperties": False,
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 40},
            "config": config_schema("broker"),
            "resources": _RESOURCES,
            "persistence": _persistence(),
        },
    }
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "pyrocketmq chart values",
        "type": "object",
        "additionalProperties": False,
        "required": [
            "image",
            "clusterName",
            "tls",
            "auth",
            "namesrv",
            "broker",
            "gateway",
            "controller",
            "etcd",
            "metrics",
            "networkPolicy",
        ],
        "properties": {
            "global": _MAP,
            "nameOverride": _STR,
            "fullnameOverride": {"type": "string", "maxLength": 40},
            "clusterName": {"type": "string", "pattern": "^[%|a-zA-Z0-9_-]+$"},
            "commonLabels": _MAP,
            "image": {
                "type": "object",
                "additionalProperties": False,
                "required": ["repository", "tag"],
                "properties": {
                    "repository": {"type": "string", "minLength": 1},
                    "tag": {"type": "string", "minLength": 1},
                    "digest": {"type": "string", "pattern": "^(sha256:[0-9a-f]{64})?$"},
                    "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
                },
            },
            "imagePullSecrets": {"type": "array", "items": _STR},
            "podSecurityContext": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "runAsUser": {"type": "integer", "minimum": 10000},
                    "runAsGroup": {"type": "integer", "minimum": 1},
                    "fsGroup": {"type": "integer", "minimum": 1},
                    "fsGroupChangePolicy": {"enum": ["OnRootMismatch", "Always"]},
                },
            },
            "serviceAccount": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"create": _BOOL, "annotations": _MAP},
            },
            "tls": _tls(),
            "auth": _auth(),
            "tmpVolume": {"type": "object", "additionalProperties": False, "properties": {"sizeLimit": _STR}},
            "metrics": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "enabled": _BOOL,
                    "port": _PORT,
                    "serviceMonitor": _monitor(),
                    "podMonitor": _monitor(),
                    "prometheusRule": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"enabled": _BOOL, "labels": _MAP},
                    },
                    "grafanaDashboards": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"enabled": _BOOL, "namespace": _STR, "labels": _MAP, "annotations": _MAP},
                    },
                },
            },
            "networkPolicy": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "enabled": _BOOL,
                    "monitoringNamespace": {"type": "string", "minLength": 1},
                    "gatewayFrom": _LIST,
                    "adminPodLabels": {"type": "object", "minProperties": 1},
                    "adminNamespaceLabels": _MAP,
                },
            },
            "namesrv": _component("namesrv", {"replicas": {"type": "integer", "minimum": 1}}, ["replicas"]),
            "broker": _component(
                "broker",
                {
                    "groups": {"type": "array", "items": group},
                    "persistence": _persistence(),
                    "haPort": _PORT,
                    "replicasPerBrokerGroup": {"type": "integer", "minimum": 1, "maximum": 9},
                    "role": {"enum": _BROKER_ROLES},
                },
                ["groups", "persistence", "haPort", "replicasPerBrokerGroup", "role"],
            ),
            "controller": _controller(),
            "etcd": _etcd(),
            "gateway": _component(
                "gateway",
                {
                    "replicas": {"type": "integer", "minimum": 1},
                    "service": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
                            "port": _PORT,
                            "annotations": _MAP,
                        },
                    },
                    "autoscaling": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "enabled": _BOOL,
                            "minReplicas": {"type": "integer", "minimum": 1},
                            "maxReplicas": {"type": "integer", "minimum": 1},
                            "targetCPUUtilizationPercentage": {"type": "integer", "minimum": 1, "maximum": 100},
                        },
                    },
                },
                ["replicas", "service", "autoscaling"],
            ),
        },
    }


def schema_text() -> str:
    return json.dumps(build_schema(), indent=2) + "\n"


if __name__ == "__main__":
    # Built in full first, then written beside the old file and renamed over it: a failure leaves the old one.
    staged = SCHEMA_PATH.with_name(SCHEMA_PATH.name + ".tmp")
    staged.write_text(schema_text(), encoding="utf-8")
    staged.replace(SCHEMA_PATH)
    print(f"wrote {SCHEMA_PATH}")
