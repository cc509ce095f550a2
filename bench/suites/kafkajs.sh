#!/usr/bin/env bash
# kafkajs's own tests (src/{broker,admin,producer,consumer,cluster}) against minikafka and Apache
# Kafka 4.2, with the settings of its docker-compose.2_4.yml brokers that one broker can have:
# num.partitions=2, auto topic creation, ACL authorizer allowing everyone,
# group.initial.rebalance.delay.ms=0, advertised host localhost, broker id 0
# (default.replication.factor 2 needs three brokers: 1 here).
# testHelpers/index.js must take the broker from KAFKAJS_HOST/KAFKAJS_PLAINTEXT_PORT (see README).
# Usage: bench/suites/kafkajs.sh KAFKAJS_REPO RUN_DIR [jest path regex]
set -u
KJ=$1; RUN=$2; PATTERN=${3:-src/(broker|admin|producer|consumer|cluster)/}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
python3 "$HERE/bench/suites/brokers.py" start "$RUN" --node-id 0 --advertised-host localhost \
  --override num.partitions=2 --override auto.create.topics.enable=true \
  --override group.initial.rebalance.delay.ms=0 \
  --override authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
  --override allow.everyone.if.no.acl.found=true || exit 1
. "$RUN/ports.env"
for side in mk:$MK_PORT kafka:$KAFKA_PORT; do
  name=${side%%:*}; port=${side#*:}
  (cd "$KJ" && KAFKA_VERSION=2.4 KAFKAJS_HOST=localhost KAFKAJS_PLAINTEXT_PORT=$port \
     KAFKAJS_DEBUG_PROTOCOL_BUFFERS=1 NODE_ENV=test timeout 1500 npx jest --runInBand --ci --forceExit --reporters=default \
     --json --outputFile="$RUN/kafkajs-$name.json" "$PATTERN" > "$RUN/kafkajs-$name.txt" 2>&1) &
done
wait
for name in mk kafka; do echo "$name: $(grep -E '^Tests:' "$RUN/kafkajs-$name.txt")"; done
python3 "$HERE/bench/suites/brokers.py" stop "$RUN"
