"""Following output from the CLI: what the attached `run` and `logs -f` rely on."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# A signal whose C handler runs in another thread sets Python's flag without interrupting the
# main thread's select(): exactly what Ctrl-C landing just before the select() call does.
_FOLLOWER = textwrap.dedent(
    """
    import io, signal, subprocess, sys, threading, time
    from pathlib import Path
    from supervisor.follow import follow_output
    from supervisor.identity import start_time
    from supervisor.rundir import RunDir

    shim = subprocess.Popen(["sleep", "60"])
    run = RunDir(Path(sys.argv[1]))

    def poke():
        time.sleep(0.5)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    threading.Thread(target=poke, daemon=True).start()
    try:
        follow_output(run, io.BytesIO(), shim=(shim.pid, start_time(shim.pid)))
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    finally:
        shim.kill()
    """
)


def test_a_signal_that_misses_the_select_call_still_wakes_the_follower(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "output.log").write_bytes(b"")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _FOLLOWER, str(run_dir)],
            capture_output=True,
            text=True,
            timeout=30,  # without the wake pipe it blocks until `sleep 60` ends
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the follower slept through SIGINT (waiting for it to print 'interrupted')")
    assert proc.stdout == "interrupted\n", proc.stderr
