"""The scenarios, by area; importing this package registers them all (engine.SCENARIOS)."""

from . import core, groups, txn, admin, acls, issue20, suites  # noqa: F401
