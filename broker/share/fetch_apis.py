"""ShareFetch (78) and ShareAcknowledge (79): registered when the broker starts, served by
``fetch.py``, which loads with the first of these requests.

A broker whose clients never use share groups does not hold the share-fetch machinery (share
partitions, share sessions, the persister's client side) in memory: this module is what a start
imports (issue 24, idle memory; tests/integration/test_startup_imports.py checks it).
"""

from __future__ import annotations

import sys

SHARE_FETCH = 78
SHARE_ACKNOWLEDGE = 79
_SERVED = "minikafka.broker.share.fetch"


async def handle_share_fetch(ctx, body: dict) -> dict:
    from .fetch import handle_share_fetch as handle

    return await handle(ctx, body)


async def handle_share_acknowledge(ctx, body: dict) -> dict:
    from .fetch import handle_share_acknowledge as handle

    return await handle(ctx, body)


def register(registry, broker) -> None:
    # Kafka 4.2 serves both at versions 1-2 (version 0 was 4.0's early access).
    registry.register(SHARE_FETCH, 1, 2, handle_share_fetch)
    registry.register(SHARE_ACKNOWLEDGE, 1, 2, handle_share_acknowledge)


async def stop(broker) -> None:
    served = sys.modules.get(_SERVED)
    if served is not None:  # nothing to close when no share fetch ever came
        await served.stop(broker)
