"""Share groups (KIP-932, "Queues for Kafka").

``persister`` is the contract between the share-group side (share partitions, which acquire,
acknowledge and redeliver records) and the share coordinator that keeps each share partition's
state durable in ``__share_group_state``.  It mirrors Kafka's ``Persister``: a share partition
reads its state once when it is first used and writes every change before it answers.
"""
