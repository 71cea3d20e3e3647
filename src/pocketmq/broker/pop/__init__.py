"""POP consumption: the broker keeps each consumer group's in-flight messages (checkpoints),
their acks and their return after the invisible time (revive), crash-safely in the CommitLog."""
