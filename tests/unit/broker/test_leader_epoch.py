from minikafka.broker.handlers.leader_epoch import leader_epoch_error
from minikafka.protocol.errors import ErrorCode


def test_single_node_leader_epoch_rules():
    assert leader_epoch_error(-1) == ErrorCode.NONE  # the client asks for no check
    assert leader_epoch_error(0) == ErrorCode.NONE
    assert leader_epoch_error(1) == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert leader_epoch_error(-2) == ErrorCode.FENCED_LEADER_EPOCH
