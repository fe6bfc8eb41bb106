"""The hook families that run inside a thread: shell hooks, system hooks (more in #4)."""
