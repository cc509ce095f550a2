"""Leader epochs on a single node: every partition has had one leader, this broker, at epoch 0.

Fetch, ListOffsets and OffsetForLeaderEpoch carry the ``current_leader_epoch`` the client
believes in (-1: no check) and Kafka answers them alike, so the rule lives here once.
"""

from minikafka.protocol.errors import ErrorCode

LEADER_EPOCH = 0


def leader_epoch_error(current_leader_epoch: int) -> int:
    """The error for a request naming ``current_leader_epoch``, or NONE when it matches ours."""
    if current_leader_epoch > LEADER_EPOCH:
        return ErrorCode.UNKNOWN_LEADER_EPOCH  # the client knows of a newer leader than we do
    if current_leader_epoch < -1:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.NONE
