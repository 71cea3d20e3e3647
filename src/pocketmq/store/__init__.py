"""The storage engine: CommitLog, ConsumeQueues, index, flush, recovery, retention. No network."""
