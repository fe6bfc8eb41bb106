"""How long output waits before the daemon reads it again: a pure decision, no I/O.

The first write after a quiet spell is read at once (a lone matching line fires within a
few milliseconds). While processes keep writing, reads come in batches at least
`MIN_GAP_S` apart, and further apart when a batch was costly, so that reading takes about
`DUTY` of one core whatever the number of writers; `MAX_GAP_S` bounds the wait, and with it
how late a matching line can fire.
"""

from __future__ import annotations

MIN_GAP_S = 0.02  # a busy process's line waits 10 ms on average, 20 at most
MAX_GAP_S = 0.1
DUTY = 0.05  # the share of a core that reading busy output may take


def next_gap(batch_cpu_s: float) -> float:
    """Seconds from the end of a batch of output reads that cost `batch_cpu_s` of CPU to
    the start of the next one."""
    return min(MAX_GAP_S, max(MIN_GAP_S, batch_cpu_s / DUTY))
