#!/usr/bin/env bash
# librdkafka's own broker tests (tests/test-runner, -L: no local-only tests, -K: none with known
# issues) against minikafka and Apache Kafka 4.2, with the settings of its trivup cluster
# (tests/scenarios/default.json: num.partitions=4, auto topic creation; cluster_testing.py:
# log.retention.bytes=1000000000, group.share.min.record.lock.duration.ms=1000; broker.rack is a
# Kafka-only setting), ACL authorizer allowing everyone. Both runners at once, test.timeout.multiplier
# for a shared machine.
# Usage: bench/suites/librdkafka.sh LIBRDKAFKA_REPO RUN_DIR [TESTS substring list] [runner args...]
set -u
RK=$1; RUN=$2; TESTS_SEL=${3:-}; shift 2; [ $# -gt 0 ] && shift
HERE=$(cd "$(dirname "$0")/../.." && pwd)
python3 "$HERE/bench/suites/brokers.py" start "$RUN" --node-id 1 \
  --override num.partitions=4 --override auto.create.topics.enable=true \
  --override log.retention.bytes=1000000000 \
  --override authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
  --override allow.everyone.if.no.acl.found=true \
  --kafka-override broker.rack=RACK1 \
  --override group.share.min.record.lock.duration.ms=1000 || exit 1
. "$RUN/ports.env"
for side in mk:$MK_PORT kafka:$KAFKA_PORT; do
  name=${side%%:*}; port=${side#*:}
  mkdir -p "$RUN/rk-$name"
  printf 'bootstrap.servers=127.0.0.1:%s\ntest.timeout.multiplier=3\n' "$port" > "$RUN/rk-$name/test.conf"
  (cd "$RK/tests" && TESTS="$TESTS_SEL" RDKAFKA_TEST_CONF="$RUN/rk-$name/test.conf" \
     LD_LIBRARY_PATH="$RK/src:$RK/src-cpp" TEST_KAFKA_VERSION=4.2.0 KAFKA_PATH="${KAFKA_PATH:-}" timeout 1500 "$RK/tests/test-runner" -L -K ${RK_PARALLEL:--p2} "$@" \
     > "$RUN/rk-$name.txt" 2>&1) &
done
wait
for name in mk kafka; do echo "$name: $(grep -E 'PASSED|FAILED|SKIPPED' "$RUN/rk-$name.txt" | grep -c PASSED) passed"; done
python3 "$HERE/bench/suites/brokers.py" stop "$RUN"
