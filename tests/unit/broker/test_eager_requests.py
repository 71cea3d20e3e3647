"""Which requests a broker starts as they are decoded (`eager_request_codes`)."""

from __future__ import annotations

from pocketmq.broker.wiring import eager_request_codes
from pocketmq.common.codes import RequestCode

SENDS = {RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE}


def test_sends_start_at_once_only_where_a_put_does_not_wait() -> None:
    """Where every put waits (SYNC_FLUSH, replication), a send started a turn earlier only
    joins a smaller group commit: it stays a task."""
    assert SENDS.issubset(eager_request_codes(puts_wait=False))
    assert not SENDS & eager_request_codes(puts_wait=True)
    for puts_wait in (False, True):
        assert RequestCode.PULL_MESSAGE in eager_request_codes(puts_wait)
        # Admin requests may use `asyncio.timeout`, which needs a task: never eager.
        assert RequestCode.UPDATE_AND_CREATE_TOPIC not in eager_request_codes(puts_wait)
