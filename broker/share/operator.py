"""Share groups for operators: what the CLI's HTTP-free paths, /metrics, the console and the control
API show of them, read from the group coordinator's shards and the share partitions (``view``).

* ``share_groups(broker)`` / ``describe(broker, group_id)``: state, epochs, members with their
  assignments (topic names), and per share partition the start offset, records in flight, acquired,
  archived and the lag, as ``view.partition_summaries`` reports them;
* ``expire_member(broker, group, member_id)``: the control API's ``share.groups.expire`` (broker/control.py
  answers ``share.groups.list``/``describe``/``expire`` from this module): the member is removed as its
  session timeout would, its share session ends and its acquired records are released;
* ``metric_families(broker)``: Prometheus gauges per share group (members, state, epochs) and per
  share partition (lag, in-flight, archived records, start offset).
"""

from __future__ import annotations

import logging

from . import view

log = logging.getLogger("minikafka.share")


def _managers(broker):
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is None:
        return []
    return [shard.share for shard in coordinator.loaded_shards()]


def _manager(broker, group_id: str):
    coordinator = getattr(broker, "group_coordinator", None)
    if coordinator is None:
        return None
    shard, _ = coordinator.check(group_id)
    if shard is None or not shard.share.has_group(group_id):
        return None
    return shard.share


def _name_of(broker):
    controller = broker.controller

    def name(topic_id):
        info = controller.topic_by_id(topic_id) if controller is not None else None
        return info.name if info is not None else None
    return name


def describe(broker, group_id: str) -> dict | None:
    """One share group for people: None when there is no such share group."""
    manager = _manager(broker, group_id)
    if manager is None:
        return None
    described = manager.describe(group_id, _name_of(broker))
    members = [{"member_id": m["member_id"], "client_id": m["client_id"], "client_host": m["client_host"],
                "rack_id": m["rack_id"], "member_epoch": m["member_epoch"],
                "subscribed_topic_names": m["subscribed_topic_names"],
                "assignment": [{"topic": tp["topic_name"], "partitions": tp["partitions"]}
                               for tp in m["assignment"]["topic_partitions"]]}
               for m in sorted(described["members"], key=lambda m: m["member_id"])]
    try:
        partitions = view.partition_summaries(broker, group_id)
    except Exception:  # the share partitions' view must not break the group's
        log.error("share group %s: partition summaries failed", group_id, exc_info=True)
        partitions = []
    return {"group": group_id, "state": described["group_state"], "group_epoch": described["group_epoch"],
            "assignment_epoch": described["assignment_epoch"], "assignor": described["assignor_name"],
            "members": members,
            "initialized": sorted([{"topic": _name_of(broker)(t) or str(t), "partitions": sorted(p)}
                                   for t, p in manager.initialized_partitions(group_id).items()],
                                  key=lambda r: r["topic"]),
            "partitions": sorted(partitions, key=lambda r: (r.get("topic", ""), r.get("partition", 0)))}


def share_groups(broker) -> list[dict]:
    """Every share group of the loaded shards: id, state, epochs and member count."""
    out = []
    for manager in _managers(broker):
        out.extend(manager.summary())
    return sorted(out, key=lambda g: g["group_id"])


# -- control API (broker/control.py answers the requests) ---------------------------------------

def expire_member(broker, group_id: str, member_id: str) -> bool | None:
    """Remove a member now, as its session timeout would, ending its share session and releasing
    what it holds; None: no share group ``group_id``, False: no such member."""
    manager = _manager(broker, group_id)
    if manager is None:
        return None
    if not manager.expire_member(group_id, member_id):
        return False
    # An expired member is gone: unlike a leave heartbeat racing its own last acknowledgements
    # (ShareFetchManager.member_left), nothing more comes from its share session.
    view.end_member(broker, group_id, member_id)
    log.warning("control: expired member %s of share group %s", member_id, group_id)
    return True



# -- /metrics -------------------------------------------------------------------------------------

def metric_families(broker):
    from prometheus_client.core import GaugeMetricFamily

    def gauge(name, doc, labels):
        return GaugeMetricFamily(name, doc, labels=list(labels))

    members = gauge("kafka_sharegroup_members", "Members of a share group.", ["sharegroup"])
    state = gauge("kafka_sharegroup_state", "1 for the share group's state (Empty, Stable).", ["sharegroup", "state"])
    epoch = gauge("kafka_sharegroup_epoch", "The share group's group epoch.", ["sharegroup"])
    lag = gauge("kafka_sharegroup_lag", "Records of a share partition not yet delivered and acknowledged: log end "
                "minus the share-partition start offset, less the records done above it (Kafka's share-group lag).",
                ["sharegroup", "topic", "partition"])
    lag_sum = gauge("kafka_sharegroup_lag_sum", "Lag summed over a share group's partitions.", ["sharegroup"])
    in_flight = gauge("kafka_sharegroup_records_in_flight", "Records between the start and end offsets of a "
                      "share partition that are not done (available or acquired).", ["sharegroup", "topic", "partition"])
    acquired = gauge("kafka_sharegroup_records_acquired", "Records of a share partition acquired (locked) now.",
                     ["sharegroup", "topic", "partition"])
    archived = gauge("kafka_sharegroup_records_archived", "Records of a share partition archived (rejected or "
                     "past the delivery limit) above its start offset.", ["sharegroup", "topic", "partition"])
    start = gauge("kafka_sharegroup_start_offset", "The share-partition start offset (SPSO).",
                  ["sharegroup", "topic", "partition"])
    for g in share_groups(broker):
        gid = g["group_id"]
        members.add_metric([gid], g["members"])
        state.add_metric([gid, g["state"]], 1)
        epoch.add_metric([gid], g["group_epoch"])
        try:
            rows = view.partition_summaries(broker, gid)
        except Exception:
            log.error("share group %s: partition summaries failed", gid, exc_info=True)
            rows = []
        total = 0
        for r in rows:
            labels = [gid, str(r.get("topic", "")), str(r.get("partition", ""))]
            for family, key in ((lag, "lag"), (in_flight, "in_flight"), (acquired, "acquired"),
                                (archived, "archived"), (start, "start_offset")):
                value = r.get(key)
                if value is not None:
                    family.add_metric(labels, value)
            total += r.get("lag") or 0
        lag_sum.add_metric([gid], total)
    return [members, state, epoch, lag, lag_sum, in_flight, acquired, archived, start]
