"""Benchmarks shipped with the package, so `pocketmq bench ...` runs them on any install."""
