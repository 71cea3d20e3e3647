"""The controller of RocketMQ 5's controller mode: a Raft group that keeps every broker group's
replicas, master, epochs and SyncStateSet, and elects a new master when one fails.

`replicas` holds the replicated tables and how events change them, `decisions` what the leader
decides for each request, `election` who may become master, `heartbeats` who is alive,
`service` the replica that serves it all, `config` its settings.
"""
