"""DescribeUserScramCredentials (key 50) v0 and AlterUserScramCredentials (key 51) v0 (KIP-554).

Credentials live in the metadata log (broker/security/store.py).  Alter receives the *salted*
password (the client salts and iterates), from which StoredKey and ServerKey are derived; the
salted password itself is not kept.  Errors as Kafka's ``ControllerApis`` / ``ScramControlManager``:
UNSUPPORTED_SASL_MECHANISM for an unknown mechanism, UNACCEPTABLE_CREDENTIAL for an empty name,
iterations outside 4096..16384 or an empty salt/salted password, RESOURCE_NOT_FOUND for deleting
or describing what does not exist, DUPLICATE_RESOURCE for a user named twice in one request
(unless its first entry already failed; see ``alter``), with Kafka's messages.
With an authorizer: DESCRIBE (Describe) or ALTER (Alter) on the cluster, else
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from minikafka.broker.security import authorizer as az
from minikafka.protocol.errors import ErrorCode

DESCRIBE, ALTER = 50, 51
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE = ErrorCode.RESOURCE_NOT_FOUND, ErrorCode.DUPLICATE_RESOURCE
UNACCEPTABLE_CREDENTIAL = ErrorCode.UNACCEPTABLE_CREDENTIAL
UNSUPPORTED_SASL_MECHANISM = ErrorCode.UNSUPPORTED_SASL_MECHANISM


async def describe(ctx, body: dict) -> dict:
    from minikafka.broker.security.scram import BY_TYPE  # hashlib/hmac: loaded on first use

    if not az.authorize(ctx, az.DESCRIBE, az.CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": "Cluster authorization failed.",
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
            results.append({"user": name, "error_code": ErrorCode.NONE, "error_message": "",  # "" as Kafka 4.2
                            "credential_infos": by_user[name]})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": "", "results": results}  # "" as Kafka 4.2


async def alter(ctx, body: dict) -> dict:
    from minikafka.broker.security.scram import BY_TYPE, MAX_ITERATIONS, MIN_ITERATIONS, credential_from_salted

    store = ctx.broker.controller.security
    deletions = body.get("deletions") or []
    upsertions = body.get("upsertions") or []
    names = [d.get("name") for d in deletions] + [u.get("name") for u in upsertions]
    if not az.authorize(ctx, az.ALTER, az.CLUSTER):
        return {"throttle_time_ms": 0, "results": [
            {"user": n, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": "Cluster authorization failed."}
            for n in dict.fromkeys(names)]}
    # Kafka 4.2's ScramControlManager, checked against its answers: the entries are taken in order,
    # deletions first.  An entry of a user whose earlier entry failed is skipped (the first error
    # stands); an entry of a user whose earlier entry passed makes that user DUPLICATE_RESOURCE
    # (nothing is changed for it).  The results list the other users in the order of Kafka's
    # HashMap of them, then the duplicated users.
    errors: dict[str, tuple[int, str]] = {}
    passed: dict[str, list] = {}
    duplicated: list[str] = []
    for kind, item in [("delete", d) for d in deletions] + [("upsert", u) for u in upsertions]:
        name = item.get("name")
        if name in errors or name in duplicated:
            continue
        if name in passed:
            del passed[name]
            duplicated.append(name)
            continue
        problem = _problem(store, kind, item, BY_TYPE, MIN_ITERATIONS, MAX_ITERATIONS)
        if problem is not None:
            errors[name] = problem
        else:
            passed[name] = [kind, item]
    for name, (kind, item) in passed.items():
        mech = BY_TYPE[item["mechanism"]]
        if kind == "delete":
            store.remove_scram(name, mech)
        else:
            store.upsert_scram(name, mech, credential_from_salted(
                mech, bytes(item["salted_password"]), bytes(item["salt"]), item["iterations"]))
    from .kraft_membership import _java_hashmap_order

    singles = [n for n in dict.fromkeys(names) if n in errors or n in passed]
    results = [{"user": n, "error_code": errors.get(n, (0, None))[0], "error_message": errors.get(n, (0, None))[1]}
               for n in _java_hashmap_order(singles, 16)]
    results += [{"user": n, "error_code": DUPLICATE_RESOURCE,
                 "error_message": "A user credential cannot be altered twice in the same request"}
                for n in duplicated]
    return {"throttle_time_ms": 0, "results": results}


def _problem(store, kind: str, item: dict, by_type, min_iterations: int, max_iterations: int):
    """Why Kafka refuses this one entry (code, Kafka's message), or None."""
    name, mech = item.get("name"), item.get("mechanism")
    if not name:
        return UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mech not in by_type:
        return UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if kind == "delete":
        if (name, by_type[mech]) not in store.scram_credentials:
            return RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        return None
    iterations = item.get("iterations", 0)
    if iterations < min_iterations:
        return UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if iterations > max_iterations:
        return UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not item.get("salt") or not item.get("salted_password"):
        return UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None


def register(registry, broker) -> None:
    registry.register(DESCRIBE, 0, 0, describe)
    registry.register(ALTER, 0, 0, alter)
