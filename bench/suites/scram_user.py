"""Create a SCRAM user on a broker (AlterUserScramCredentials through confluent-kafka's admin).

    python bench/suites/scram_user.py HOST:PORT USER PASSWORD [SCRAM-SHA-256|SCRAM-SHA-512] [ITERATIONS]

With SCRAM_USER_SASL=MECHANISM:USER:PASSWORD the admin client logs in over SASL_PLAINTEXT (e.g. as
a super user once ACLs exist).
"""
import os
import sys

from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

bootstrap, user, password = sys.argv[1:4]
mechanism = ScramMechanism[(sys.argv[4] if len(sys.argv) > 4 else "SCRAM-SHA-256").replace("-", "_")]
iterations = int(sys.argv[5]) if len(sys.argv) > 5 else 4096
conf = {"bootstrap.servers": bootstrap}
if os.environ.get("SCRAM_USER_SASL"):
    mech, login, secret = os.environ["SCRAM_USER_SASL"].split(":", 2)
    conf.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
                 "sasl.username": login, "sasl.password": secret})
admin = AdminClient(conf)
futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
    user, ScramCredentialInfo(mechanism, iterations), password.encode())])
for f in futures.values():
    f.result(timeout=30)
print(f"{user}: {mechanism.name} set on {bootstrap}")
