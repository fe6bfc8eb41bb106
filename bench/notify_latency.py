"""How long from a crash to its notification: a child that exits 1 at once, under a hook with
`notify: ops`, where `ops` is an Apprise json:// target served by a webhook server on
127.0.0.1 in this process; per run, the time from the crashed run's end (the shim's record in
exit.json) to the POST arriving at the server.

    .venv/bin/python bench/notify_latency.py [--runs 30] [--json]

This is the whole path: the daemon notices the end (a pidfd), commits the fire with its
outbox row in one transaction, its outbox worker reads the row, Apprise builds and sends the
POST (a worker thread), the server reads it. The runs go one after the other on one daemon;
the first, which pays Apprise's import and plugin load (about 1 s), is a warm-up, not counted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import Home  # bench/ is not a package

CHILD = "exit 1"


class Arrivals:
    def __init__(self) -> None:
        self.times: list[tuple[float, str]] = []
        self.cond = threading.Condition()

    def wait(self, count: int, timeout: float = 30.0) -> tuple[float, str]:
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.times) >= count, timeout):
                raise SystemExit(f"notification {count} did not arrive within {timeout:g}s")
            return self.times[count - 1]


def serve(arrivals: Arrivals) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            at = time.time()
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            with arrivals.cond:
                arrivals.times.append((at, str(body.get("title", ""))))
                arrivals.cond.notify_all()
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def measure(runs: int) -> list[float]:
    arrivals = Arrivals()
    server = serve(arrivals)
    home = Home()
    try:
        settings = home.dir / "settings.toml"
        port = server.server_address[1]
        settings.write_text(
            f'[notify]\nrate = "100000/minute"\n[notify.targets]\n'
            f'ops = "json://127.0.0.1:{port}/hook"\n'
        )
        home.env["SUPERVISE_CONFIG"] = str(settings)
        hooks = home.dir / "notify.json"
        hook = {"name": "crashed", "on_exit": {"exit_codes": [1]}, "notify": "ops"}
        hooks.write_text(json.dumps({"hooks": [hook]}))
        home.start()
        gaps = []
        for n in range(runs + 1):
            out = home.cli("run", "-d", "--json", "--hook", str(hooks), "--", "sh", "-c", CHILD)
            pid = json.loads(out)["id"]
            at, title = arrivals.wait(n + 1)
            if f"(process {pid})" not in title:
                raise SystemExit(f"notification {n + 1} is not about process {pid}: {title}")
            ended = json.loads((home.dir / "runs" / str(pid) / "exit.json").read_text())
            if n > 0:  # the first pays Apprise's import: a warm-up
                gaps.append(at - float(ended["ended_at"]))
        return gaps
    finally:
        home.stop()
        server.shutdown()


def figures(runs: int) -> dict[str, float]:
    """Crash -> notification over `runs` crashes: p50, p95, max and min in ms."""
    ms = sorted(g * 1000 for g in measure(runs))
    return {
        "runs": len(ms),
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(ms[max(int(len(ms) * 0.95) - 1, 0)], 1),
        "max_ms": round(ms[-1], 1),
        "min_ms": round(ms[0], 1),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    figures_ = figures(args.runs)
    if args.json:
        print(json.dumps(figures_))
    else:
        print(
            f"crash -> notification (json:// to 127.0.0.1), {figures_['runs']} runs: p50 "
            f"{figures_['p50_ms']} ms, p95 {figures_['p95_ms']} ms, max {figures_['max_ms']} ms "
            f"(min {figures_['min_ms']} ms)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
