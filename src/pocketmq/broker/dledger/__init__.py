"""DLedger mode: a broker group's CommitLog replicated by Raft, the leader serving as master.

`settings` reads RocketMQ's DLedger keys, `commands` encodes what goes into the Raft log,
`state_machine` applies committed entries to the CommitLog and the metadata tables,
`metadata` turns the master's metadata changes into entries, `replica` owns the Raft node,
the put path's writer and the role switches, `handlers` answers status and leadership
transfer requests.
"""
