"""Persistence shared by the supervisor and the agent threads: paths, tables, engine."""
