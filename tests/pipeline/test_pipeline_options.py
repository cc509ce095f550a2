"""Option parsing and offset-range planning: pure functions, no Spark, no broker."""

import pickle

import pytest

from minikafka.pipeline.options import (
    EARLIEST,
    LATEST,
    OffsetPlanError,
    OffsetRange,
    OptionError,
    Subscription,
    cap_offsets,
    from_checkpoint,
    parse_offsets_json,
    parse_sink_options,
    parse_source_options,
    plan_ranges,
    resolve,
    to_checkpoint,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a,b"}


def opts(**extra):
    return {**BASE, **extra}


# --- parsing ------------------------------------------------------------------------------


def test_defaults_follow_spark_for_batch_and_streaming():
    batch = parse_source_options(BASE, streaming=False)
    stream = parse_source_options(BASE, streaming=True)
    assert batch.starting == "earliest" and batch.ending == "latest"
    assert stream.starting == "latest"
    assert batch.subscription == Subscription(topics=("a", "b"))
    assert batch.bootstrap_servers == "127.0.0.1:9092"
    assert not batch.include_headers and batch.fail_on_data_loss
    assert stream.max_offsets_per_trigger is None


def test_option_names_are_case_insensitive_and_kafka_settings_pass_through():
    o = parse_source_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Subscribe": "t",
                              "kafka.isolation.level": "read_committed",
                              "STARTINGOFFSETS": "earliest", "maxOffsetsPerTrigger": "10"},
                             streaming=True)
    assert o.bootstrap_servers == "h:1"
    assert o.client == {"isolation.level": "read_committed"}
    assert o.starting == "earliest" and o.max_offsets_per_trigger == 10


def test_subscribe_list_is_trimmed_and_deduplicated():
    o = parse_source_options(opts(subscribe=" a , b,a,, "), streaming=True)
    assert o.subscription.topics == ("a", "b")


def test_assign_json():
    o = parse_source_options({"kafka.bootstrap.servers": "h:1", "assign": '{"t":[1,0],"u":[3]}'},
                             streaming=False)
    assert o.subscription.assigned == (("t", 0), ("t", 1), ("u", 3))


def test_subscribe_pattern_selects_matching_topics_but_not_internal_ones():
    o = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribePattern": "ev.*"},
                             streaming=True)
    chosen = o.subscription.select({"events": 2, "evx": 1, "other": 3, "__consumer_offsets": 50})
    assert chosen == [("events", 0), ("events", 1), ("evx", 0)]


def test_subscribe_skips_topics_that_do_not_exist():
    assert Subscription(topics=("a", "zz")).select({"a": 2, "b": 1}) == [("a", 0), ("a", 1)]


def test_per_partition_json_offsets():
    o = parse_source_options(opts(startingOffsets='{"a":{"0":23,"1":-2}}',
                                  endingOffsets='{"a":{"0":50,"1":-1}}'), streaming=False)
    assert o.starting == {("a", 0): 23, ("a", 1): EARLIEST}
    assert o.ending == {("a", 0): 50, ("a", 1): LATEST}


@pytest.mark.parametrize("options, streaming, fragment", [
    ({"subscribe": "t"}, True, "kafka.bootstrap.servers' is required"),
    ({"kafka.bootstrap.servers": "h:1"}, True, "exactly one of the options 'subscribe'"),
    (opts(assign='{"t":[0]}'), True, "got: subscribe, assign"),
    (opts(startingOffsets="newest"), True, "option 'startingOffsets' must be 'earliest'"),
    (opts(startingOffsets='{"a":{"x":1}}'), True, "partition 'x' of topic 'a'"),
    (opts(startingOffsets='{"a":{"0":-3}}'), True, "-2 (earliest) or -1 (latest)"),
    (opts(startingOffsets='{"a": 5}'), True, "must map partitions to offsets"),
    (opts(startingOffsets='{"a":'), True, "must be 'earliest', 'latest' or JSON"),
    (opts(maxOffsetsPerTrigger="lots"), True, "'maxOffsetsPerTrigger' must be an integer"),
    (opts(maxOffsetsPerTrigger="0"), True, "must be a positive integer"),
    (opts(endingOffsets="latest"), True, "'endingOffsets' is not valid in streaming"),
    (opts(startingOffsets="latest"), False, "cannot be 'latest' (or -1) for batch"),
    (opts(endingOffsets="earliest"), False, "cannot be 'earliest' (or -2) for batch"),
    (opts(maxOffsetsPerTrigger="5"), False, "only valid in streaming queries"),
    (opts(includeHeaders="maybe"), True, "'includeHeaders' must be true or false"),
    (opts(startingOffset="earliest"), True, "did you mean 'startingOffsets'"),
    (opts(startingTimestamp="1000"), True, "not supported by the minikafka source"),
    (opts(**{"kafka.auto.offset.reset": "earliest"}), True, "use startingOffsets instead"),
    (opts(**{"kafka.enable.auto.commit": "true"}), True, "Spark's checkpoint"),
    (opts(subscribePattern="(", subscribe=""), True, "not a valid regex"),
    ({"kafka.bootstrap.servers": "h:1", "assign": '{"t":[-1]}'}, True,
     "'assign' must be JSON like"),
    ({"kafka.bootstrap.servers": "h:1", "assign": '{"t":[0]}',
      "startingOffsets": '{"t":{"1":5}}'}, True, "names partitions that are not assigned: t-1"),
])
def test_bad_options_fail_with_a_message_naming_the_option(options, streaming, fragment):
    with pytest.raises(OptionError) as info:
        parse_source_options(options, streaming=streaming)
    assert fragment in str(info.value)


def test_sink_options():
    s = parse_sink_options({"kafka.bootstrap.servers": "h:1", "topic": "out",
                            "kafka.linger.ms": "20"})
    assert s.topic == "out" and s.client == {"linger.ms": "20"}
    assert parse_sink_options({"kafka.bootstrap.servers": "h:1"}).topic is None
    with pytest.raises(OptionError, match="read option"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "subscribe": "x"})
    with pytest.raises(OptionError, match="did you mean 'topic'"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "topics": "x"})


def test_options_are_picklable_plain_data():
    o = parse_source_options(opts(startingOffsets='{"a":{"0":1},"b":{"0":2}}'), streaming=True)
    assert pickle.loads(pickle.dumps(o)) == o


def test_each_reader_gets_its_own_group_id_unless_one_is_given():
    o = parse_source_options(BASE, streaming=True)
    assert o.group_id() != o.group_id()
    assert o.group_id().startswith("minikafka-spark-source-")
    fixed = parse_source_options(opts(**{"kafka.group.id": "g"}), streaming=True)
    assert fixed.group_id() == "g"


# --- checkpoint form ----------------------------------------------------------------------


def test_checkpoint_form_round_trips_with_string_partition_keys():
    offsets = {("a", 1): 7, ("a", 0): 5, ("b", 0): 0}
    doc = to_checkpoint(offsets)
    assert doc == {"a": {"0": 5, "1": 7}, "b": {"0": 0}}
    assert from_checkpoint(doc) == offsets
    assert parse_offsets_json('{"a":{"0":5,"1":7},"b":{"0":0}}', "x") == offsets


# --- resolving offset specs ---------------------------------------------------------------

MARKS = {("a", 0): (0, 100), ("a", 1): (10, 20)}
TPS = [("a", 0), ("a", 1)]


def test_resolve_earliest_latest_and_sentinels():
    assert resolve("earliest", TPS, MARKS, name="startingOffsets") == {("a", 0): 0, ("a", 1): 10}
    assert resolve("latest", TPS, MARKS, name="endingOffsets") == {("a", 0): 100, ("a", 1): 20}
    spec = {("a", 0): 42, ("a", 1): EARLIEST}
    assert resolve(spec, TPS, MARKS, name="startingOffsets") == {("a", 0): 42, ("a", 1): 10}
    spec = {("a", 0): LATEST, ("a", 1): 15}
    assert resolve(spec, TPS, MARKS, name="endingOffsets") == {("a", 0): 100, ("a", 1): 15}


def test_resolve_requires_every_partition_and_known_partitions():
    with pytest.raises(OffsetPlanError, match="missing: a-1"):
        resolve({("a", 0): 1}, TPS, MARKS, name="startingOffsets")
    with pytest.raises(OffsetPlanError, match="do not exist: a-7"):
        resolve({("a", 0): 1, ("a", 1): 11, ("a", 7): 0}, TPS, MARKS, name="startingOffsets")


def test_resolve_out_of_range_fails_or_clamps():
    spec = {("a", 0): 5, ("a", 1): 3}
    with pytest.raises(OffsetPlanError, match=r"offset 3 for a-1 is outside .*\[10, 20\]"):
        resolve(spec, TPS, MARKS, name="startingOffsets")
    assert resolve(spec, TPS, MARKS, name="startingOffsets", fail_on_data_loss=False) == \
        {("a", 0): 5, ("a", 1): 10}


# --- rate limiting ------------------------------------------------------------------------


def test_cap_admits_everything_under_the_limit():
    start = {("a", 0): 0, ("a", 1): 0}
    latest = {("a", 0): 10, ("a", 1): 5}
    assert cap_offsets(start, latest, None) == latest
    assert cap_offsets(start, latest, 15) == latest


def test_cap_shares_the_limit_in_proportion_and_exactly():
    start = {("a", 0): 0, ("a", 1): 100}
    latest = {("a", 0): 300, ("a", 1): 200}
    end = cap_offsets(start, latest, 100)
    assert end == {("a", 0): 75, ("a", 1): 125}
    odd = cap_offsets(start, latest, 7)
    assert sum(odd[tp] - start[tp] for tp in start) == 7


def test_cap_of_one_still_makes_progress_and_never_passes_latest():
    start = {("a", 0): 0, ("a", 1): 0, ("b", 0): 5}
    latest = {("a", 0): 3, ("a", 1): 3, ("b", 0): 5}
    total = 0
    pos = dict(start)
    for _ in range(6):
        nxt = cap_offsets(pos, latest, 1)
        assert all(pos[tp] <= nxt[tp] <= latest[tp] for tp in latest)
        total += sum(nxt[tp] - pos[tp] for tp in latest)
        pos = nxt
    assert pos == latest and total == 6


# --- range planning -----------------------------------------------------------------------


def test_plan_one_range_per_non_empty_partition():
    ranges = plan_ranges({("a", 0): 5, ("a", 1): 7, ("b", 0): 3},
                         {("a", 0): 9, ("a", 1): 7, ("b", 0): 4})
    assert ranges == [OffsetRange("a", 0, 5, 9), OffsetRange("b", 0, 3, 4)]


def test_plan_new_partition_starts_at_its_earliest_offset():
    ranges = plan_ranges({("a", 0): 5}, {("a", 0): 6, ("a", 1): 4},
                         new_partition_start={("a", 1): 2})
    assert ranges == [OffsetRange("a", 0, 5, 6), OffsetRange("a", 1, 2, 4)]


def test_plan_refuses_an_end_before_the_start():
    with pytest.raises(OffsetPlanError, match="before its start offset"):
        plan_ranges({("a", 0): 9}, {("a", 0): 4})


def test_min_partitions_splits_contiguously_and_deterministically():
    start = {("a", 0): 0, ("a", 1): 100}
    end = {("a", 0): 1000, ("a", 1): 101}
    ranges = plan_ranges(start, end, min_partitions=4)
    assert ranges == plan_ranges(start, end, min_partitions=4)
    a0 = [r for r in ranges if r.partition == 0]
    assert len(a0) == 4
    assert a0[0].from_offset == 0 and a0[-1].until_offset == 1000
    assert all(x.until_offset == y.from_offset for x, y in zip(a0, a0[1:]))
    assert [r for r in ranges if r.partition == 1] == [OffsetRange("a", 1, 100, 101)]
    assert sum(r.size for r in ranges) == 1001
