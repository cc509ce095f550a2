"""Create a SCRAM user on a broker (AlterUserScramCredentials through confluent-kafka's admin).

    python bench/suites/scram_user.py HOST:PORT USER PASSWORD [SCRAM-SHA-256|SCRAM-SHA-512] [ITERATIONS]
"""
import sys

from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

bootstrap, user, password = sys.argv[1:4]
mechanism = ScramMechanism[(sys.argv[4] if len(sys.argv) > 4 else "SCRAM-SHA-256").replace("-", "_")]
iterations = int(sys.argv[5]) if len(sys.argv) > 5 else 4096
admin = AdminClient({"bootstrap.servers": bootstrap})
futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
    user, ScramCredentialInfo(mechanism, iterations), password.encode())])
for f in futures.values():
    f.result(timeout=30)
print(f"{user}: {mechanism.name} set on {bootstrap}")
