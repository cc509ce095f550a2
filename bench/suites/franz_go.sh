#!/usr/bin/env bash
# franz-go's pkg/kgo tests against minikafka and Apache Kafka 4.2, with the settings of its CI
# broker (.github/workflows/lint-and-test.yml: apache/kafka, node id 1, KGO_TEST_RF=1,
# KGO_TEST_STABLE_FETCH, group.coordinator.rebalance.protocols=classic,consumer,share: share is a
# Kafka-only setting while minikafka does not serve share groups), and its SASL_PLAINTEXT listener
# with SCRAM-SHA-256 user testuser:testpass (KGO_TEST_SCRAM_SEEDS, KGO_TEST_SCRAM).
# KGO_TEST_RECORDS defaults to 50000 here (the suite: 500000) to fit a 25-minute box on 2 shared cores.
# Usage: bench/suites/franz_go.sh KGO_TEST_BINARY RUN_DIR [-run regex]
set -u
BIN=$1; RUN=$2; shift 2
HERE=$(cd "$(dirname "$0")/../.." && pwd)
python3 "$HERE/bench/suites/brokers.py" start "$RUN" --node-id 1 \
  --override sasl.enabled.mechanisms=SCRAM-SHA-256 \
  --minikafka-override "listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{extra_port}" \
  --kafka-override "listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port},SASL_PLAINTEXT://127.0.0.1:{extra_port}" \
  --kafka-override "advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{extra_port}" \
  --kafka-override "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT" \
  --kafka-override "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;" \
  --kafka-override group.coordinator.rebalance.protocols=classic,consumer,share \
  --kafka-override share.coordinator.state.topic.num.partitions=5 || exit 1
. "$RUN/ports.env"
for p in $MK_PORT $KAFKA_PORT; do
  "$HERE/.venv/bin/python" "$HERE/bench/suites/scram_user.py" 127.0.0.1:$p testuser testpass || exit 1
done
for side in mk:$MK_PORT:$MK_EXTRA_PORT kafka:$KAFKA_PORT:$KAFKA_EXTRA_PORT; do
  IFS=: read -r name port sasl_port <<< "$side"
  (cd "$RUN" && KGO_TEST_SCRAM_SEEDS=127.0.0.1:$sasl_port KGO_TEST_SCRAM=testuser:testpass KGO_TEST_RF=1 KGO_TEST_STABLE_FETCH=true KGO_TEST_RECORDS=${KGO_TEST_RECORDS:-50000} KGO_SEEDS=127.0.0.1:$port timeout 1500 \
     "$BIN" -test.v -test.timeout 24m "$@" > "$RUN/kgo-$name.txt" 2>&1) &
done
wait
for name in mk kafka; do echo "$name: $(grep -c -- '--- PASS' "$RUN/kgo-$name.txt") pass, $(grep -c -- '--- FAIL' "$RUN/kgo-$name.txt") fail, $(grep -c -- '--- SKIP' "$RUN/kgo-$name.txt") skip; $(tail -1 "$RUN/kgo-$name.txt")"; done
python3 "$HERE/bench/suites/brokers.py" stop "$RUN"
