"""Transactional messages on the broker: half messages, END_TRANSACTION and the check-back.

`half_messages` holds the conversions and decisions (pure), `handlers` answers
END_TRANSACTION (37), `check_service` asks producers about halves nobody ended
(CHECK_TRANSACTION_STATE, 39). The put path stores a send with TRAN_MSG=true through
`half_messages.to_half`. Import the modules themselves: the put path imports `half_messages`
and `handlers` imports the put path, so this package imports nothing.
"""
