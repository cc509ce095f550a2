#!/usr/bin/env bash
# aiokafka's own broker tests (tests/) against minikafka and Apache Kafka 4.2, with the settings of
# its docker image (docker/scripts/start-kafka.sh: num.partitions=2, auto topic creation, ACL
# authorizer allowing everyone, super.users=User:admin; Kafka's server.properties:
# group.initial.rebalance.delay.ms=0).
# The repo's tests/conftest.py needs the AIOKAFKA_EXTERNAL block (see bench/suites/README.md).
# Usage: bench/suites/aiokafka.sh AIOKAFKA_REPO VENV RUN_DIR [pytest args...]
set -u
AK=$1; AKV=$2; RUN=$3; shift 3
HERE=$(cd "$(dirname "$0")/../.." && pwd)
python3 "$HERE/bench/suites/brokers.py" start "$RUN" --node-id 0 \
  --override num.partitions=2 --override auto.create.topics.enable=true \
  --override group.initial.rebalance.delay.ms=0 \
  --override authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer \
  --override allow.everyone.if.no.acl.found=true --override super.users=User:admin || exit 1
. "$RUN/ports.env"
for side in mk:$MK_PORT kafka:$KAFKA_PORT; do
  name=${side%%:*}; port=${side#*:}
  (cd "$AK" && AIOKAFKA_EXTERNAL=127.0.0.1:$port timeout 1500 "$AKV/bin/python" -m pytest tests \
     --docker-image aiolibs/kafka:2.13_3.9.0 --timeout 90 -q -rA -p no:cacheprovider "$@" \
     > "$RUN/aiokafka-$name.txt" 2>&1) &
done
wait
for name in mk kafka; do echo "$name: $(tail -1 "$RUN/aiokafka-$name.txt")"; done
python3 "$HERE/bench/suites/brokers.py" stop "$RUN"
