#!/usr/bin/env bash
# kafka-python's own test/integration against minikafka and Apache Kafka 4.2, same settings as the
# suite's own broker (servers/resources/default/kafka.properties).
# Usage: bench/suites/kafka_python.sh KP_REPO KP_VENV RUN_DIR [KAFKA_VERSION...]
set -u
KP=$1; KPV=$2; RUN=$3; shift 3
VERSIONS=${*:-4.0.0 3.9.0}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
python3 "$HERE/bench/suites/brokers.py" start "$RUN" --node-id 0 \
  --override num.partitions=4 --override group.min.session.timeout.ms=1000 \
  --override group.initial.rebalance.delay.ms=0 --override offsets.topic.num.partitions=2 \
  --override log.cleaner.enable=false \
  --override authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
  --override allow.everyone.if.no.acl.found=true \
  --kafka-override offsets.commit.timeout.ms=500 || exit 1
. "$RUN/ports.env"
for v in $VERSIONS; do
  mkdir -p "$KP/servers/$v/kafka-bin/bin"
  for side in mk:$MK_PORT kafka:$KAFKA_PORT; do
    name=${side%%:*}; port=${side#*:}
    (cd "$KP" && KAFKA_VERSION=$v KAFKA_URI=tcp://127.0.0.1:$port timeout 1500 "$KPV/bin/python" -m pytest \
       test/integration --timeout=120 --timeout-method=signal -q -rA -p no:cacheprovider \
       > "$RUN/kp-$v-$name.txt" 2>&1) &
  done
  wait   # both sides at once (same run); then the next version
  for name in mk kafka; do echo "$v $name: $(tail -1 "$RUN/kp-$v-$name.txt")"; done
done
python3 "$HERE/bench/suites/brokers.py" stop "$RUN"
