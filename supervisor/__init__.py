"""The process half of supervise: launch, shim, tailing, triggers, limits, recovery, daemon, CLI."""
