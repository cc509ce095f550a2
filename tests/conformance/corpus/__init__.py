"""The scenarios, by area; importing this package registers them all (engine.SCENARIOS)."""

from . import (  # noqa: F401
    core, groups, txn, admin, acls, issue20, share_group, share_state, share_fetch, share_fetch_rotation, streams, tidy, configs, suites,
)
