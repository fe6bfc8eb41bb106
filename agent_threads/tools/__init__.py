"""The tools a thread can call."""
