"""Producers: queue selection that avoids failing brokers, the automatic batcher, sends."""
