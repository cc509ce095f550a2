"""The transaction coordinator: one shard per ``__transaction_state`` partition (see coordinator.py).

``apis`` imports the coordinator's modules only when the coordinator is created (the first
transactional request, or a broker start with ``__transaction_state`` on disk).
"""

TRANSACTION_STATE_TOPIC = "__transaction_state"
