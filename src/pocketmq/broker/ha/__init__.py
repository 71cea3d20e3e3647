"""Master/Slave replication of the CommitLog (RocketMQ's default HA service).

`protocol` holds the bytes on the wire, `master` the master's side (a server on the HA port
streaming CommitLog bytes to each slave and counting their acknowledgements), `slave` the
slave's side (a client that appends what it receives and reports its offset), `sync` the
slave's pull of topics, groups and offsets from the master, `metadata_sync` where the pulled
documents go in the broker's tables.
"""
