"""``minikafka users``: SCRAM credentials.

Two ways, as Kafka has two:

- ``--data-dir DIR`` writes the credential records straight into a stopped broker's metadata log
  (Kafka: ``kafka-storage format --add-scram``), so a broker can start with its users in place.
  Never use it while a broker runs on that directory.
- ``--bootstrap-server HOST:PORT`` asks a running broker with AlterUserScramCredentials /
  DescribeUserScramCredentials (Kafka: ``kafka-configs --alter --entity-type users``), through
  kafka-python's admin client; ``--client-config k=v`` passes its settings (security_protocol,
  sasl_mechanism, sasl_plain_username, ssl_cafile, ...).  A broker's error (unknown user,
  missing ALTER on the cluster, ...) is printed on stderr and the exit status is 1.

    minikafka users add alice --password s3cret --mechanism SCRAM-SHA-512 --data-dir ./data
    minikafka users list --bootstrap-server 127.0.0.1:9092
    minikafka users delete alice --mechanism SCRAM-SHA-512 --bootstrap-server 127.0.0.1:9092
"""

from __future__ import annotations

import sys

from .scram import MECHANISMS, MIN_ITERATIONS, credential_from_password


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("users", help="manage SCRAM credentials")
    parser.add_argument("action", choices=("add", "delete", "list"))
    parser.add_argument("name", nargs="?")
    parser.add_argument("--password", help="the password (add)")
    parser.add_argument("--mechanism", action="append", choices=sorted(MECHANISMS),
                        help="SCRAM-SHA-256 and/or SCRAM-SHA-512 (default both)")
    parser.add_argument("--iterations", type=int, default=MIN_ITERATIONS)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--data-dir", help="a stopped broker's data directory")
    where.add_argument("--bootstrap-server", help="a running broker")
    parser.add_argument("--client-config", action="append", default=[], metavar="KEY=VALUE",
                        help="kafka-python admin client setting (with --bootstrap-server)")


def _offline(args, mechanisms, open_storage) -> int:
    from ..config import BrokerConfig
    from .store import SecurityStore

    config = BrokerConfig(data_dir=args.data_dir)
    metadata_log, log_manager = open_storage(config)
    try:
        def commit(record):
            metadata_log.append(record)
            store.apply(record)

        store = SecurityStore(commit)
        for record in metadata_log.records():
            store.apply(record)
        if args.action == "add":
            for mech in mechanisms:
                store.upsert_scram(args.name, mech, credential_from_password(mech, args.password, args.iterations))
                print(f"added {mech} credential for {args.name}")
        elif args.action == "delete":
            for mech in mechanisms:
                if (args.name, mech) in store.scram_credentials:
                    store.remove_scram(args.name, mech)
                    print(f"deleted {mech} credential of {args.name}")
        else:
            for (name, mech), cred in sorted(store.scram_credentials.items()):
                print(f"{name} {mech} iterations={cred.iterations}")
    finally:
        metadata_log.close()
        close = getattr(log_manager, "close", None)
        if close is not None:
            close()
    return 0


def _online(args, mechanisms) -> int:
    from kafka.admin import KafkaAdminClient
    from kafka.admin._users import (ScramMechanism, UserScramCredentialDeletion,
                                    UserScramCredentialUpsertion)

    settings = {}
    for item in args.client_config:
        key, _, value = item.partition("=")
        settings[key.strip()] = value
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap_server, **settings)
    failed = False
    try:
        if args.action == "list":
            # Same lines as the offline listing; a user without credentials is the broker's error.
            described = admin.describe_user_scram_credentials([args.name] if args.name else None)
            for name, result in sorted(described.items()):
                if result.get("error"):
                    print(f"{name}: {result['error']}", file=sys.stderr)
                    failed = True
                    continue
                for info in sorted(result["credential_infos"], key=lambda i: i["mechanism"].name):
                    print(f"{name} {info['mechanism'].name.replace('_', '-')} iterations={info['iterations']}")
            return 1 if failed else 0
        alterations = []
        for mech in mechanisms:
            mechanism = ScramMechanism[mech.replace("-", "_")]
            if args.action == "add":
                alterations.append(UserScramCredentialUpsertion(args.name, mechanism, args.password,
                                                                iterations=args.iterations))
            else:
                alterations.append(UserScramCredentialDeletion(args.name, mechanism))
        # One request per credential: Kafka (and this broker) refuse a user named twice in one
        # AlterUserScramCredentials request (DUPLICATE_RESOURCE).
        for alteration in alterations:
            error = admin.alter_user_scram_credentials([alteration]).get(args.name)
            if error:
                print(f"{args.name}: {error}", file=sys.stderr)
                return 1
        verb = "added" if args.action == "add" else "deleted"
        for mech in mechanisms:
            print(f"{verb} {mech} credential for {args.name}")
    finally:
        admin.close()
    return 0


def run(args, open_storage=None) -> int:
    """``open_storage(config) -> (metadata log, log manager)`` opens a stopped broker's data dir for
    ``--data-dir`` (broker/controller.py's, handed in by the command line: this module sits below
    the controller and does not import it)."""
    mechanisms = args.mechanism or sorted(MECHANISMS)
    if args.action in ("add", "delete") and not args.name:
        print("minikafka users: a user name is required", file=sys.stderr)
        return 2
    if args.action == "add" and not args.password:
        print("minikafka users add: --password is required", file=sys.stderr)
        return 2
    return _offline(args, mechanisms, open_storage) if args.data_dir else _online(args, mechanisms)
