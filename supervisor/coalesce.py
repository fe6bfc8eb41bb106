"""How long output waits before the daemon reads it again: a pure decision, no I/O.

The first write after a quiet spell is read at once (a lone matching line fires within a
few milliseconds). While processes keep writing, reads come in batches at least
`MIN_GAP_S` apart, and further apart when a batch was costly, so that reading takes about
`DUTY` of one core whatever the number of writers; `MAX_GAP_S` bounds the wait, and with it
how late a matching line can fire.

A batch has a fixed cost (~0.5 ms: the hop to the worker thread, the event loop's timers),
so a process writing faster than `FAST_BYTES_PER_S` is read every `MAX_GAP_S` instead of
every batch: each of its reads then brings 100 KB or more and the cost per byte dominates
(a line-per-write child of 139 MB paid 0.2 s of batches at 20 ms, 0.05 s at 100 ms). Its
matching lines fire up to `MAX_GAP_S` late; slower writers are read every batch.
"""

from __future__ import annotations

MIN_GAP_S = 0.02  # a busy process's line waits 10 ms on average, 20 at most
MAX_GAP_S = 0.1
DUTY = 0.05  # the share of a core that reading busy output may take
FAST_BYTES_PER_S = 1_000_000  # ~15,000 lines a second: a log firehose, not a service


def next_gap(batch_cpu_s: float) -> float:
    """Seconds from the end of a batch of output reads that cost `batch_cpu_s` of CPU to
    the start of the next one."""
    return min(MAX_GAP_S, max(MIN_GAP_S, batch_cpu_s / DUTY))


def read_delay(read_bytes: int, since_s: float) -> float:
    """Seconds from a read that found `read_bytes` new bytes, `since_s` after the process's
    previous read, until it is read again: 0 (the next batch) unless it writes fast."""
    if since_s > 0 and read_bytes / since_s >= FAST_BYTES_PER_S:
        return MAX_GAP_S
    return 0.0
