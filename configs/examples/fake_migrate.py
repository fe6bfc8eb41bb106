"""A stand-in for `python manage.py migrate` for the quickstart: prints, deadlocks, fails."""

import sys
import time

steps = ["0040_users", "0041_sessions", "0042_auth_refactor"]
for step in steps:
    print(f"Applying auth.{step}...", flush=True)
    time.sleep(0.2)
    if step == "0042_auth_refactor":
        print(
            "ERROR: deadlock detected while altering table auth_token", file=sys.stderr, flush=True
        )
        print(
            'django.db.utils.ProgrammingError: column "jwt_secret" does not exist', file=sys.stderr
        )
        sys.exit(1)
    print(f"  Applying auth.{step}... OK", flush=True)
