"""Consumers: push, lite pull, rebalance and offset stores."""
