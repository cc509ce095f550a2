#!/usr/bin/env bash
# aiokafka's own broker tests (tests/) against minikafka and Apache Kafka 4.2, with the settings of
# its docker image (docker/scripts/start-kafka.sh: num.partitions=2, auto topic creation, ACL
# authorizer allowing everyone, super.users=User:admin (and User:ANONYMOUS: the PLAINTEXT and
# CONTROLLER listeners' principal, which Kafka's KRaft node needs once the tests put ACLs on the
# cluster; ZooKeeper-era images did not); Kafka's server.properties:
# group.initial.rebalance.delay.ms=0), and its SSL listener requiring client certificates.
# The repo's tests/conftest.py needs the AIOKAFKA_EXTERNAL block of bench/suites/prepare.sh;
# the aiokafka venv needs kafka-python (the ACLs) and AIOKAFKA_TESTS picks test files.
# Usage: bench/suites/aiokafka.sh AIOKAFKA_REPO VENV RUN_DIR [pytest args...]
set -u
AK=$1; AKV=$2; RUN=$3; shift 3
HERE=$(cd "$(dirname "$0")/../.." && pwd)
# SSL listener with client certificates required, as the image's (certificates: minikafka certs),
# and its SASL_PLAINTEXT listener (PLAIN users admin, test, test2 from its JAAS file; SCRAM users
# created by the tests through AIOKAFKA_SCRAM_CMD; no GSSAPI: no KDC here). The tests' ACLs go
# through the Admin API (kafka-python in the aiokafka venv) instead of kafka-acls.sh in a container.
CERTS="$RUN/certs"; mkdir -p "$RUN"
PLAIN='org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin" user_admin="admin" user_test="test" user_test2="test2";'
SCRAM='org.apache.kafka.common.security.scram.ScramLoginModule required;' 
"$HERE/.venv/bin/python" -m minikafka certs --out "$CERTS" --client client > /dev/null || exit 1
cp "$CERTS/ca.pem" "$CERTS/ca.crt"
python3 "$HERE/bench/suites/brokers.py" start "$RUN" --node-id 0 \
  --minikafka-override "listeners=PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{extra_port},SASL_PLAINTEXT://127.0.0.1:{extra_port2}" \
  --kafka-override "listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port},SSL://127.0.0.1:{extra_port},SASL_PLAINTEXT://127.0.0.1:{extra_port2}" \
  --kafka-override "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT" \
  --override "advertised.listeners=PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{extra_port},SASL_PLAINTEXT://127.0.0.1:{extra_port2}" \
  --override sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512 \
  --override "listener.name.sasl_plaintext.plain.sasl.jaas.config=$PLAIN" \
  --kafka-override "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=$SCRAM" \
  --kafka-override "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=$SCRAM" \
  --override ssl.keystore.type=PEM --override "ssl.keystore.location=$CERTS/broker.pem" \
  --override ssl.truststore.type=PEM --override "ssl.truststore.location=$CERTS/ca.pem" \
  --override ssl.client.auth=required \
  --override num.partitions=2 --override auto.create.topics.enable=true \
  --override group.initial.rebalance.delay.ms=0 \
  --override authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
  --override allow.everyone.if.no.acl.found=true --override "super.users=User:admin;User:ANONYMOUS" || exit 1
. "$RUN/ports.env"
for side in mk:$MK_PORT:$MK_EXTRA_PORT:$MK_EXTRA_PORT2 kafka:$KAFKA_PORT:$KAFKA_EXTRA_PORT:$KAFKA_EXTRA_PORT2; do
  IFS=: read -r name port ssl_port sasl_port <<< "$side"
  (cd "$AK" && AIOKAFKA_SSL_FOLDER="$CERTS" AIOKAFKA_EXTERNAL_SSL_PORT=$ssl_port \
     AIOKAFKA_EXTERNAL_SASL_PORT=$sasl_port \
     AIOKAFKA_SCRAM_CMD="$HERE/.venv/bin/python $HERE/bench/suites/scram_user.py" AIOKAFKA_EXTERNAL=127.0.0.1:$port timeout 1500 "$AKV/bin/python" -m pytest ${AIOKAFKA_TESTS:-tests} \
     --docker-image aiolibs/kafka:2.13_3.9.0 --timeout 90 -q -rA -p no:cacheprovider "$@" \
     > "$RUN/aiokafka-$name.txt" 2>&1) &
done
wait
for name in mk kafka; do echo "$name: $(tail -1 "$RUN/aiokafka-$name.txt")"; done
python3 "$HERE/bench/suites/brokers.py" stop "$RUN"
