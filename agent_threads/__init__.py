"""Execution threads: spawning (prompt rendering), and later the agent loop and its hooks."""
