#!/usr/bin/env bash
# kafkajs's own tests (src/{broker,admin,producer,consumer,cluster}) against minikafka and Apache
# Kafka 4.2, with the settings of its docker-compose.2_4.yml brokers that one broker can have:
# num.partitions=2, auto topic creation, ACL authorizer allowing everyone,
# group.initial.rebalance.delay.ms=0, advertised host localhost, broker id 0, its PLAINTEXT, SSL and
# SASL_SSL listeners (PLAIN users test, bob, alice; SCRAM-SHA-256/512 user testscram) with a
# certificate from `minikafka certs` (kafkajs does not verify it)
# (default.replication.factor 2 needs three brokers: 1 here).
# testHelpers/index.js must take the broker from KAFKAJS_HOST and KAFKAJS_{PLAINTEXT,SSL,SASL}_PORT
# (bench/suites/prepare.sh).
# Usage: bench/suites/kafkajs.sh KAFKAJS_REPO RUN_DIR [jest path regex]
set -u
KJ=$1; RUN=$2; PATTERN=${3:-src/(broker|admin|producer|consumer|cluster)/}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
CERTS="$RUN/certs"
mkdir -p "$RUN"; "$HERE/.venv/bin/python" -m minikafka certs --out "$CERTS" > /dev/null || exit 1
PLAIN='org.apache.kafka.common.security.plain.PlainLoginModule required username="test" password="testtest" user_test="testtest" user_bob="bobbob" user_alice="alicealice";'
SCRAM='org.apache.kafka.common.security.scram.ScramLoginModule required;'
python3 "$HERE/bench/suites/brokers.py" start "$RUN" --node-id 0 \
  --override "advertised.listeners=PLAINTEXT://localhost:{port},SSL://localhost:{extra_port},SASL_SSL://localhost:{extra_port2}" \
  --minikafka-override "listeners=PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{extra_port},SASL_SSL://127.0.0.1:{extra_port2}" \
  --kafka-override "listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port},SSL://127.0.0.1:{extra_port},SASL_SSL://127.0.0.1:{extra_port2}" \
  --kafka-override "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL" \
  --override ssl.keystore.type=PEM --override "ssl.keystore.location=$CERTS/broker.pem" \
  --override sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512 \
  --override "listener.name.sasl_ssl.plain.sasl.jaas.config=$PLAIN" \
  --kafka-override "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=$SCRAM" \
  --kafka-override "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=$SCRAM" \
  --override num.partitions=2 --override auto.create.topics.enable=true \
  --override group.initial.rebalance.delay.ms=0 \
  --override authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
  --override allow.everyone.if.no.acl.found=true || exit 1
. "$RUN/ports.env"
for p in $MK_PORT $KAFKA_PORT; do
  "$HERE/.venv/bin/python" "$HERE/bench/suites/scram_user.py" 127.0.0.1:$p testscram 'testtestscram=256' SCRAM-SHA-256 || exit 1
  "$HERE/.venv/bin/python" "$HERE/bench/suites/scram_user.py" 127.0.0.1:$p testscram 'testtestscram=512' SCRAM-SHA-512 || exit 1
done
for side in mk:$MK_PORT:$MK_EXTRA_PORT:$MK_EXTRA_PORT2 kafka:$KAFKA_PORT:$KAFKA_EXTRA_PORT:$KAFKA_EXTRA_PORT2; do
  IFS=: read -r name port ssl_port sasl_port <<< "$side"
  (cd "$KJ" && KAFKA_VERSION=2.4 KAFKAJS_HOST=localhost KAFKAJS_PLAINTEXT_PORT=$port \
     KAFKAJS_SSL_PORT=$ssl_port KAFKAJS_SASL_PORT=$sasl_port \
     KAFKAJS_DEBUG_PROTOCOL_BUFFERS=1 NODE_ENV=test timeout 1500 npx jest --runInBand --ci --forceExit --reporters=default \
     --json --outputFile="$RUN/kafkajs-$name.json" "$PATTERN" > "$RUN/kafkajs-$name.txt" 2>&1) &
done
wait
for name in mk kafka; do echo "$name: $(grep -E '^Tests:' "$RUN/kafkajs-$name.txt")"; done
python3 "$HERE/bench/suites/brokers.py" stop "$RUN"
