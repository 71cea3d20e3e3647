"""The replicated key-value store: the example of a state machine on `pocketmq.raft`, and the
test bed of the Raft driver (`pocketmq raftkv`)."""
