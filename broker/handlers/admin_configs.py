"""Config administration: DescribeConfigs (32) v1-4, AlterConfigs (33) v0-2,
IncrementalAlterConfigs (44) v0-1.

Resources: TOPIC (2), BROKER (4, name "" = cluster-wide default, or our node id), BROKER_LOGGER
(8, Python logging levels under log4j names) and GROUP (32, a group id: broker/group_configs.py).
CLIENT_METRICS answers INVALID_REQUEST.  The config table, sources and synonyms are in
``broker.configs`` (Kafka 4.2's broker configs from broker/kafka_configs.py, loaded with the first
request that needs them).

* DescribeConfigs: all configs when ``configuration_keys`` is null or empty, else the named ones
  (unknown names are left out, as Kafka does).  v1+ reports config_source and, when asked,
  synonyms; v3+ config_type and, when asked, documentation.  An unknown topic answers
  UNKNOWN_TOPIC_OR_PARTITION without a message, an illegal name INVALID_TOPIC_EXCEPTION.
* AlterConfigs replaces the resource's whole set of dynamic configs (names left out are
  deleted); IncrementalAlterConfigs applies SET / DELETE / APPEND / SUBTRACT (the last two only
  on LIST configs).  Both validate everything first, change nothing with validate_only, and
  answer per resource.  Broker changes follow Kafka's ConfigAdminManager: read-only names and bad
  values are INVALID_REQUEST ("Cannot update these configs dynamically: Set(...)"); topic changes
  follow the controller: bad names or values are INVALID_CONFIG.
"""

from __future__ import annotations

import logging
from collections import Counter

from minikafka.broker.security import authorizer as az
from minikafka.protocol.errors import ErrorCode, KafkaError, error_name

from minikafka.broker import configs as cfg
from minikafka.broker.configs import AlterConfigOp, ResourceType

log = logging.getLogger(__name__)

DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
INCREMENTAL_ALTER_CONFIGS = 44


class ResourceError(Exception):
    def __init__(self, code: int, message: str | None = None):
        super().__init__(message)
        self.code = int(code)
        self.message = message


def _node_id(broker) -> int:
    node_id = getattr(broker.controller, "node_id", None)
    if node_id is None:
        node_id = getattr(broker.config, "node_id", 1)
    return int(node_id)


def _parse_broker_name(name: str, node_id: int, describe: bool) -> None:
    # The texts differ between DescribeConfigs (ConfigHelper) and the alter path (ConfigAdminManager).
    try:
        value = int(name)
    except ValueError:
        prefix = "Broker id" if describe else "Node id"
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"{prefix} must be an integer, but it is: {name}") from None
    if value != node_id:
        if describe:
            raise ResourceError(ErrorCode.INVALID_REQUEST,
                                f"Unexpected broker id, expected {node_id} or empty string, but received {name}")
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {node_id}, but received {name}")


def _topic_or_error(broker, name: str):
    problem = cfg.topic_name_problem(name)
    if problem:
        raise ResourceError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    info = broker.controller.topics.get(name)
    return info


def _select(all_names, keys) -> list[str]:
    if not keys:
        return sorted(all_names)
    wanted = []
    for key in keys:
        if key in all_names and key not in wanted:
            wanted.append(key)
    return wanted


# -- BROKER_LOGGER ------------------------------------------------------------------------

_LOG4J_TO_PY = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
                "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10,
                "ALL": 1}
_LOGGER_PACKAGES = ("minikafka",)


def _log4j_level(level: int) -> str:
    best = "ALL"
    for name, value in sorted(_LOG4J_TO_PY.items(), key=lambda kv: kv[1]):
        if level >= value:
            best = name
    return best


def _loggers() -> dict[str, logging.Logger]:
    found = {"root": logging.getLogger()}
    for name, logger in logging.Logger.manager.loggerDict.items():
        if isinstance(logger, logging.Logger) and name.split(".")[0] in _LOGGER_PACKAGES:
            found[name] = logger
    return found


def _describe_loggers(keys) -> list[dict]:
    loggers = _loggers()
    return [{"name": name, "value": _log4j_level(loggers[name].getEffectiveLevel()), "read_only": False,
             "is_default": False, "config_source": int(cfg.ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG),
             "is_sensitive": False, "synonyms": [], "config_type": int(cfg.ConfigType.STRING),
             "documentation": None}
            for name in _select(loggers, keys)]


def _alter_loggers(configs: list[dict], validate_only: bool) -> None:
    changes = []
    for config in configs:
        name, op, value = config["name"], config.get("config_operation", 0), config.get("value")
        if op == AlterConfigOp.SET:
            level = (value or "").upper()
            if level not in _LOG4J_TO_PY:
                raise ResourceError(ErrorCode.INVALID_CONFIG,
                                    f"Cannot set the log level of {name} to {value} as it is not a supported "
                                    "log level. Valid log4j levels are " + ", ".join(sorted(_LOG4J_TO_PY)))
            changes.append((name, _LOG4J_TO_PY[level]))
        elif op == AlterConfigOp.DELETE:
            if name == "root":
                raise ResourceError(ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed")
            changes.append((name, logging.NOTSET))
        else:
            verb = AlterConfigOp(op).name if op in (2, 3) else str(op)
            raise ResourceError(ErrorCode.INVALID_REQUEST, f"{verb} operation is not allowed for the BROKER_LOGGER resource")
    if validate_only:
        return
    for name, level in changes:
        logger = logging.getLogger() if name == "root" else logging.getLogger(name)
        logger.setLevel(level)


# -- DescribeConfigs ----------------------------------------------------------------------

def _describe_one(broker, resource: dict, include_synonyms: bool, include_documentation: bool) -> list[dict]:
    rtype = resource["resource_type"]
    name = resource["resource_name"]
    keys = resource.get("configuration_keys")
    store = cfg.dynamic_configs(broker)
    if rtype == ResourceType.TOPIC:
        info = _topic_or_error(broker, name)
        if info is None:
            raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        overrides = info.configs or {}
        return [cfg.topic_entry(n, overrides, store, include_synonyms, include_documentation)
                for n in _select(cfg.TOPIC_CONFIGS, keys)]
    if rtype == ResourceType.BROKER:
        if not name:
            return [cfg.broker_entry(n, store, False, include_synonyms, include_documentation)
                    for n in _select(store.cluster_default, keys)]
        _parse_broker_name(name, _node_id(broker), describe=True)
        return [cfg.broker_entry(n, store, True, include_synonyms, include_documentation)
                for n in _select(cfg.described_broker_names(store), keys)]
    if rtype == ResourceType.GROUP:
        from minikafka.broker import group_configs

        return group_configs.describe(broker, name, keys, include_synonyms, include_documentation)
    if rtype == ResourceType.BROKER_LOGGER:
        if not name:
            raise ResourceError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        try:
            value = int(name)
        except ValueError:
            raise ResourceError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}") from None
        if value != _node_id(broker):
            raise ResourceError(ErrorCode.INVALID_REQUEST,
                                f"Unexpected broker id, expected {_node_id(broker)} but received {name}")
        return _describe_loggers(keys)
    raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {_type_name(rtype)}")


def _type_name(rtype: int) -> str:
    try:
        return ResourceType(rtype).name
    except ValueError:
        return "UNKNOWN"


def _authorize_resource(ctx, resource: dict, operation: int) -> None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster for broker resources."""
    if resource["resource_type"] == ResourceType.TOPIC:
        if not az.authorize(ctx, operation, az.TOPIC, resource["resource_name"]):
            raise ResourceError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
    elif resource["resource_type"] == ResourceType.GROUP:
        if not az.authorize(ctx, operation, az.GROUP, resource["resource_name"]):
            raise ResourceError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    elif not az.authorize(ctx, operation, az.CLUSTER):
        raise ResourceError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")


async def describe_configs(ctx, body: dict) -> dict:
    broker = ctx.broker
    include_synonyms = bool(body.get("include_synonyms", False))
    include_documentation = bool(body.get("include_documentation", False))
    results = []
    for resource in body.get("resources") or ():
        # Kafka answers "" (not null) where a result has no message, errors included.
        result = {"error_code": ErrorCode.NONE, "error_message": "", "resource_type": resource["resource_type"],
                  "resource_name": resource["resource_name"], "configs": []}
        try:
            _authorize_resource(ctx, resource, az.DESCRIBE_CONFIGS)
            result["configs"] = _describe_one(broker, resource, include_synonyms, include_documentation)
        except ResourceError as exc:
            result.update(error_code=exc.code, error_message=exc.message if exc.message is not None else "")
        except cfg.ConfigRefused as exc:
            result.update(error_code=exc.code, error_message=str(exc))
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}


# -- AlterConfigs / IncrementalAlterConfigs -----------------------------------------------

def _preprocess(resource: dict, incremental: bool) -> None:
    """ConfigAdminManager.preprocess: duplicate keys and null values."""
    configs = resource.get("configs") or []
    names = [c["name"] for c in configs]
    if len(set(names)) != len(names):
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [c["name"] for c in configs if c.get("value") is None
             and not (incremental and c.get("config_operation") == AlterConfigOp.DELETE)]
    if nulls:
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
    if incremental:
        for c in configs:
            op = c.get("config_operation")
            if op not in (0, 1, 2, 3):
                raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {op}")


async def _alter_topic(broker, name: str, configs: list[dict], incremental: bool, validate_only: bool) -> None:
    if not name:
        raise ResourceError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
    problem = cfg.topic_name_problem(name)
    if problem:
        raise ResourceError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    controller = broker.controller
    info = controller.topics.get(name)
    current = dict(info.configs or {}) if info is not None else {}
    try:
        if incremental:
            new = cfg.apply_incremental(current, [(c["name"], c["config_operation"], c.get("value"))
                                                  for c in configs], cfg.TOPIC_CONFIGS)
        else:
            new = {c["name"]: c["value"] for c in configs}
        canonical = cfg.validate_topic_configs(new)
    except cfg.ConfigError as exc:
        raise ResourceError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    if info is None:
        raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    if validate_only:
        return
    changes: dict[str, str | None] = {k: v for k, v in canonical.items() if current.get(k) != v}
    changes.update({k: None for k in current if k not in canonical})
    if not changes:
        return
    try:
        result = controller.set_topic_configs(name, changes)
        if hasattr(result, "__await__"):
            await result
    except KafkaError as exc:
        text = str(exc)
        raise ResourceError(exc.code, None if text == error_name(exc.code) else text) from None
    log.info("topic %s configs changed: %s", name, changes)


def _alter_broker(broker, name: str, configs: list[dict], incremental: bool, validate_only: bool) -> None:
    if name:
        _parse_broker_name(name, _node_id(broker), describe=False)
    store = cfg.dynamic_configs(broker)
    per_broker = bool(name)
    current = dict(store.resource(per_broker))
    table = cfg.broker_configs()
    if incremental:
        new = dict(current)
        for c in configs:
            op, key_name, value = c["config_operation"], c["name"], c.get("value")
            if op == AlterConfigOp.SET:
                new[key_name] = value
            elif op == AlterConfigOp.DELETE:
                new.pop(key_name, None)
            else:
                key = table.get(key_name)
                if key is None:
                    # Kafka 4.2 answers UNKNOWN_SERVER_ERROR without a message here (its
                    # controller looks the name's type up and finds none).
                    raise ResourceError(ErrorCode.UNKNOWN_SERVER_ERROR, None)
                if key.type is not cfg.ConfigType.LIST:
                    verb = "append" if op == AlterConfigOp.APPEND else "subtract"
                    raise ResourceError(ErrorCode.INVALID_CONFIG,
                                        f"Config value {verb} is not allowed for config key: {key_name}")
                new = cfg.apply_incremental(new, [(key_name, op, value)], table)
    else:
        new = {c["name"]: c["value"] for c in configs}
    try:
        canonical = cfg.validate_broker_changes(new, per_broker, lambda n: cfg.broker_value(n, store))
        if not per_broker:
            cfg.check_cluster_min_insync(broker.controller, canonical)
    except cfg.BrokerConfigRefused as exc:
        raise ResourceError(exc.code, str(exc)) from None
    except cfg.ConfigError as exc:
        raise ResourceError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    if per_broker:
        try:
            cfg.check_listener_update(current, canonical, _listener_names(broker))
        except cfg.BrokerConfigRefused as exc:
            raise ResourceError(exc.code, str(exc)) from None
    if validate_only:
        return
    changed = {k for k in set(current) | set(canonical) if current.get(k) != canonical.get(k)}
    if not changed:
        return
    store.replace(per_broker, canonical)
    log.info("dynamic broker configs (%s) now %s", name or "<default>", canonical)
    refresh_topic_logs(broker, changed)


def _listener_names(broker) -> list[str]:
    try:
        listeners = broker.config.get("listeners") or ""
    except Exception:
        listeners = ""
    names = [item.split("://")[0].strip() for item in str(listeners).split(",") if "://" in item]
    return names or ["PLAINTEXT"]


def refresh_topic_logs(broker, changed_broker_names) -> None:
    """Hand new effective configs to the logs of topics that take a changed broker default.

    The controller derives a topic's log settings from BrokerConfig when a topic is opened or
    its overrides change; re-setting no overrides (an empty change) makes it derive them again.
    """
    controller = getattr(broker, "controller", None)
    changed = set(changed_broker_names)
    if controller is None or not changed:
        return
    affected = [topic for topic, synonyms in cfg.TOPIC_SYNONYMS.items()
                if any(name in changed for name, _ in synonyms)]
    if not affected:
        return
    refresh = getattr(controller, "refresh_topic_configs", None)
    for name, info in list(controller.topics.items()):
        if all(topic in (info.configs or {}) for topic in affected):
            continue
        try:
            if refresh is not None:
                refresh(name)
            else:
                controller.set_topic_configs(name, {})
        except KafkaError as exc:
            log.warning("could not refresh the log configs of %s: %s", name, exc)


async def _alter(ctx, body: dict, incremental: bool) -> dict:
    broker = ctx.broker
    validate_only = bool(body.get("validate_only", False))
    resources = body.get("resources") or []
    counts = Counter((r["resource_type"], r["resource_name"]) for r in resources)
    responses = []
    for resource in resources:
        rtype, name = resource["resource_type"], resource["resource_name"]
        response = {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": rtype, "resource_name": name}
        responses.append(response)
        try:
            if counts[(rtype, name)] > 1:
                raise ResourceError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            _authorize_resource(ctx, resource, az.ALTER_CONFIGS)
            _preprocess(resource, incremental)
            configs = resource.get("configs") or []
            if rtype == ResourceType.TOPIC:
                await _alter_topic(broker, name, configs, incremental, validate_only)
            elif rtype == ResourceType.BROKER:
                _alter_broker(broker, name, configs, incremental, validate_only)
            elif rtype == ResourceType.GROUP:
                from minikafka.broker import group_configs

                group_configs.alter(broker, name, configs, incremental, validate_only)
            elif rtype == ResourceType.BROKER_LOGGER and incremental:
                if not name:
                    raise ResourceError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
                _parse_broker_name(name, _node_id(broker), describe=False)
                _alter_loggers(configs, validate_only)
            else:
                raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {rtype}")
        except ResourceError as exc:
            response.update(error_code=exc.code, error_message=exc.message)
        except cfg.ConfigRefused as exc:
            response.update(error_code=exc.code, error_message=str(exc))
    return {"throttle_time_ms": 0, "responses": responses}


async def alter_configs(ctx, body: dict) -> dict:
    return await _alter(ctx, body, incremental=False)


async def incremental_alter_configs(ctx, body: dict) -> dict:
    return await _alter(ctx, body, incremental=True)


def register(registry, broker) -> None:
    # Push the dynamic broker configs into the running BrokerConfig now (the config table itself
    # loads with the first DescribeConfigs or alteration).
    try:
        store = cfg.dynamic_configs(broker)
        refresh_topic_logs(broker, (set(store.per_broker) | set(store.cluster_default)) - {"min.insync.replicas"})
    except Exception:  # pragma: no cover - a broker without config/data dir (tests)
        log.exception("could not load dynamic broker configs")
    registry.register(DESCRIBE_CONFIGS, 1, 4, describe_configs)
    registry.register(ALTER_CONFIGS, 0, 2, alter_configs)
    registry.register(INCREMENTAL_ALTER_CONFIGS, 0, 1, incremental_alter_configs)
