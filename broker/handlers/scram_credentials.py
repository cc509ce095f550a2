"""DescribeUserScramCredentials (key 50) v0 and AlterUserScramCredentials (key 51) v0 (KIP-554).

Credentials live in the metadata log (broker/security/store.py).  Alter receives the *salted*
password (the client salts and iterates), from which StoredKey and ServerKey are derived; the
salted password itself is not kept.  Errors as Kafka's ``ControllerApis`` / ``ScramControlManager``:
UNSUPPORTED_SASL_MECHANISM for an unknown mechanism, UNACCEPTABLE_CREDENTIAL for an empty name,
iterations outside 4096..16384 or an empty salt/salted password, RESOURCE_NOT_FOUND for deleting
or describing what does not exist, DUPLICATE_RESOURCE for a user named twice in one request.
With an authorizer: DESCRIBE (Describe) or ALTER (Alter) on the cluster, else
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from minikafka.broker.security import authorizer as az

DESCRIBE, ALTER = 50, 51
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL = 91, 92, 93
UNSUPPORTED_SASL_MECHANISM = 33


async def describe(ctx, body: dict) -> dict:
    from minikafka.broker.security.scram import BY_TYPE  # hashlib/hmac: loaded on first use

    if not az.authorize(ctx, az.DESCRIBE, az.CLUSTER):
        return {"throttle_time_ms": 0, "error_code": 31, "error_message": "Cluster authorization failed.",
                "results": []}
    store = ctx.broker.controller.security
    by_user: dict[str, list] = {}
    for (name, mech), cred in sorted(store.scram_credentials.items()):
        code = {v: k for k, v in BY_TYPE.items()}[mech]
        by_user.setdefault(name, []).append({"mechanism": code, "iterations": cred.iterations})
    users = body.get("users")
    results = []
    if not users:  # null or an empty list: every user (Kafka's ScramImage.describe; librdkafka sends [])
        names = sorted(by_user)
    else:
        names = [u.get("name") for u in users]
    counts = {n: names.count(n) for n in names}
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append({"user": name, "error_code": DUPLICATE_RESOURCE,
                            "error_message": f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}",
                            "credential_infos": []})
        elif name not in by_user:
            results.append({"user": name, "error_code": RESOURCE_NOT_FOUND,
                            "error_message": f"Attempt to describe a user credential that does not exist: {name}",
                            "credential_infos": []})
        else:
            results.append({"user": name, "error_code": 0, "error_message": None,
                            "credential_infos": by_user[name]})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": "", "results": results}  # "" as Kafka 4.2


async def alter(ctx, body: dict) -> dict:
    from minikafka.broker.security.scram import BY_TYPE, MAX_ITERATIONS, MIN_ITERATIONS, credential_from_salted

    store = ctx.broker.controller.security
    deletions = body.get("deletions") or []
    upsertions = body.get("upsertions") or []
    names = [d.get("name") for d in deletions] + [u.get("name") for u in upsertions]
    if not az.authorize(ctx, az.ALTER, az.CLUSTER):
        return {"throttle_time_ms": 0, "results": [
            {"user": n, "error_code": 31, "error_message": "Cluster authorization failed."}
            for n in dict.fromkeys(names)]}
    seen: dict[tuple[str, int], int] = {}
    for item in deletions + upsertions:
        key = (item.get("name"), item.get("mechanism"))
        seen[key] = seen.get(key, 0) + 1
    errors: dict[str, tuple[int, str]] = {}

    def fail(name, code, message):
        errors.setdefault(name, (code, message))

    for item in deletions + upsertions:
        name, mech = item.get("name"), item.get("mechanism")
        if not name:
            fail(name, UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech not in BY_TYPE:
            fail(name, UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {mech}")
        elif seen[(name, mech)] > 1:
            fail(name, DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    for item in upsertions:
        name = item.get("name")
        iterations = item.get("iterations", 0)
        if not (MIN_ITERATIONS <= iterations <= MAX_ITERATIONS):
            fail(name, UNACCEPTABLE_CREDENTIAL,
                 f"Iterations {iterations} outside {MIN_ITERATIONS}..{MAX_ITERATIONS}")
        elif not item.get("salt") or not item.get("salted_password"):
            fail(name, UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
    for item in deletions:
        name, mech = item.get("name"), item.get("mechanism")
        if name not in errors and (name, BY_TYPE.get(mech)) not in store.scram_credentials:
            fail(name, RESOURCE_NOT_FOUND, f"Attempt to delete a user credential that does not exist: {name}")
    for item in deletions:
        if item["name"] not in errors:
            store.remove_scram(item["name"], BY_TYPE[item["mechanism"]])
    for item in upsertions:
        if item["name"] not in errors:
            mech = BY_TYPE[item["mechanism"]]
            store.upsert_scram(item["name"], mech, credential_from_salted(
                mech, bytes(item["salted_password"]), bytes(item["salt"]), item["iterations"]))
    results = []
    for name in dict.fromkeys(names):
        code, message = errors.get(name, (0, None))
        results.append({"user": name, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "results": results}


def register(registry, broker) -> None:
    registry.register(DESCRIBE, 0, 0, describe)
    registry.register(ALTER, 0, 0, alter)
