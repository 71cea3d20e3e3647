"""The `pocketmq` command: argument parsing only; the work happens in the packages it calls."""
