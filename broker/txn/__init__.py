"""The transaction coordinator: one shard per ``__transaction_state`` partition (see coordinator.py)."""
