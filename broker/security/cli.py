"""The security sub-commands of ``minikafka``: ``certs`` (broker/security/certs.py) and ``users``
(broker/security/users.py).  ``cli.py`` calls :func:`add_parsers` and :func:`run`."""

from __future__ import annotations

COMMANDS = ("certs", "users")


def add_parsers(subparsers) -> None:
    from . import certs, users

    certs.add_parser(subparsers)
    users.add_parser(subparsers)


def run(args, open_storage=None) -> int | None:
    """Run a security sub-command; None when ``args.command`` is not one of them.  ``open_storage``
    (broker/controller.py's) is what ``users --data-dir`` writes through."""
    if args.command == "certs":
        from . import certs

        return certs.run(args)
    if args.command == "users":
        from . import users

        return users.run(args, open_storage)
    return None
