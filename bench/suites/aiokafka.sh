#!/usr/bin/env bash
# aiokafka's own broker tests (tests/) against minikafka and Apache Kafka 4.2, with the settings of
# its docker image (docker/scripts/start-kafka.sh: num.partitions=2, auto topic creation, ACL
# authorizer allowing everyone, super.users=User:admin; Kafka's server.properties:
# group.initial.rebalance.delay.ms=0), and its SSL listener requiring client certificates.
# The repo's tests/conftest.py needs the AIOKAFKA_EXTERNAL block (see bench/suites/README.md).
# Usage: bench/suites/aiokafka.sh AIOKAFKA_REPO VENV RUN_DIR [pytest args...]
set -u
AK=$1; AKV=$2; RUN=$3; shift 3
HERE=$(cd "$(dirname "$0")/../.." && pwd)
# SSL listener with client certificates required, as the image's (certificates: minikafka certs)
CERTS="$RUN/certs"; mkdir -p "$RUN"
"$HERE/.venv/bin/python" -m minikafka certs --out "$CERTS" --client client > /dev/null || exit 1
cp "$CERTS/ca.pem" "$CERTS/ca.crt"
python3 "$HERE/bench/suites/brokers.py" start "$RUN" --node-id 0 \
  --minikafka-override "listeners=PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{extra_port}" \
  --kafka-override "listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port},SSL://127.0.0.1:{extra_port}" \
  --kafka-override "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL" \
  --override "advertised.listeners=PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{extra_port}" \
  --override ssl.keystore.type=PEM --override "ssl.keystore.location=$CERTS/broker.pem" \
  --override ssl.truststore.type=PEM --override "ssl.truststore.location=$CERTS/ca.pem" \
  --override ssl.client.auth=required \
  --override num.partitions=2 --override auto.create.topics.enable=true \
  --override group.initial.rebalance.delay.ms=0 \
  --override authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
  --override allow.everyone.if.no.acl.found=true --override super.users=User:admin || exit 1
. "$RUN/ports.env"
for side in mk:$MK_PORT:$MK_EXTRA_PORT kafka:$KAFKA_PORT:$KAFKA_EXTRA_PORT; do
  IFS=: read -r name port ssl_port <<< "$side"
  (cd "$AK" && AIOKAFKA_SSL_FOLDER="$CERTS" AIOKAFKA_EXTERNAL_SSL_PORT=$ssl_port AIOKAFKA_EXTERNAL=127.0.0.1:$port timeout 1500 "$AKV/bin/python" -m pytest tests \
     --docker-image aiolibs/kafka:2.13_3.9.0 --timeout 90 -q -rA -p no:cacheprovider "$@" \
     > "$RUN/aiokafka-$name.txt" 2>&1) &
done
wait
for name in mk kafka; do echo "$name: $(tail -1 "$RUN/aiokafka-$name.txt")"; done
python3 "$HERE/bench/suites/brokers.py" stop "$RUN"
