"""Ports that tests replace: the clock. Real implementations live here, with a manual clock."""

from pocketmq.runtime.clock import Clock, ManualClock, SystemClock

__all__ = ["Clock", "ManualClock", "SystemClock"]
