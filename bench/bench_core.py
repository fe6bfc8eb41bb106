"""Benchmarks of the supervisor core (issue #2's speed targets).

Run: `python bench/bench_core.py [--lines 2000000] [--runs 3] [--procs 100] [--peers]`
Prints a table and writes bench/results.json. Benchmarks never fail: they measure.

Workloads:
  chatty   a child prints N lines (~70 bytes each) with 10 on_output_match patterns active:
           the child's runtime supervised / writing to a plain file, the daemon's CPU seconds,
           and the scan throughput of the matcher beside `grep -E` on the same file.
  latency  100 matching lines 20 ms apart: line written -> thread row visible in SQLite.
  scale    K sleeping processes: shim private memory (USS), daemon RSS, daemon CPU while idle,
           `supervise ps` wall time.
  peers    (--peers) the chatty child under supervisord in its own venv, same output.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PATTERNS = [
    "deadlock detected",
    "ERROR",
    r"Traceback \(most recent",
    "panic:",
    "FATAL",
    "out of memory",
    "segfault",
    "connection refused",
    r"timeout after \d+s",
    "(?i)warning",
]

CHILD = r"""
import sys, time
n = int(sys.argv[1]); out = sys.stdout.buffer
t = time.perf_counter()
words = [b"INFO GET /api/v1/items 200 in 12ms cache hit"]
chunk = []
for i in range(n):
    chunk.append(b"2026-11-23T00:00:00.%06d %s %d\n" % (i % 1000000, words[0], i))
    if len(chunk) == 20000:
        out.write(b"".join(chunk)); chunk.clear()
out.write(b"".join(chunk)); out.flush()
open(sys.argv[2], "w").write(str(time.perf_counter() - t))
"""


def cpu_seconds(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


class Home:
    """A throwaway state dir with a real daemon."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="supervise-bench-"))
        self.env = {**os.environ, "SUPERVISE_HOME": str(self.dir), "PYTHONPATH": str(ROOT)}
        self.daemon: subprocess.Popen[bytes] | None = None

    def start(self) -> int:
        log = open(self.dir / "bench-daemon.log", "ab")  # noqa: SIM115 - lives with the daemon
        self.daemon = subprocess.Popen(
            [sys.executable, "-m", "supervisor", "daemon"], stdout=log, stderr=log, env=self.env
        )
        deadline = time.monotonic() + 20
        while "daemon ready" not in (self.dir / "bench-daemon.log").read_text():
            if time.monotonic() > deadline:
                raise SystemExit("daemon did not start")
            time.sleep(0.05)
        return self.daemon.pid

    def warm_up(self, hooks: Path) -> None:
        """One short process first: a new daemon's first commit pays SQLAlchemy's set-up."""
        out = self.cli("run", "-d", "--json", "--hook", str(hooks), "--", "true")
        self.wait_exited(json.loads(out)["id"])

    def cli(self, *args: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "supervisor", *args],
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    def stop(self) -> None:
        for pidfile in (self.dir / "runs").glob("*/child.pid"):
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.killpg(int(pidfile.read_text()), signal.SIGKILL)
        if self.daemon is not None:
            self.daemon.send_signal(signal.SIGTERM)
            self.daemon.wait(20)
        shutil.rmtree(self.dir, ignore_errors=True)

    def wait_exited(self, pid: int, timeout: float = 300) -> None:
        db = self.dir / "state.db"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with sqlite3.connect(db) as c:
                row = c.execute("select state from process where id=?", (pid,)).fetchone()
            if row and row[0] in ("exited", "lost"):
                return
            time.sleep(0.02)
        raise SystemExit(f"process {pid} did not finish")


def hooks_file(folder: Path, patterns: list[str]) -> Path:
    path = folder / "bench-hooks.json"
    hooks = [
        {"name": f"p{i}", "on_output_match": {"pattern": p}, "instructions": "x"}
        for i, p in enumerate(patterns)
    ]
    path.write_text(json.dumps({"hooks": hooks}))
    return path


def chatty(lines: int, npat: int, max_log_bytes: int | None = None) -> dict[str, float]:
    home = Home()
    if max_log_bytes is not None:
        home.env["SUPERVISE_MAX_LOG_BYTES"] = str(max_log_bytes)
    try:
        work = home.dir / "work"
        work.mkdir()
        script = work / "child.py"
        script.write_text(CHILD)
        plain_t = work / "plain.t"
        with open(work / "plain.log", "wb") as f:
            subprocess.run(
                [sys.executable, str(script), str(lines), str(plain_t)], stdout=f, check=True
            )
        pats = (PATTERNS * 10)[:npat]
        hooks = hooks_file(work, pats)
        dpid = home.start()
        home.warm_up(hooks)
        cpu0 = cpu_seconds(dpid)
        sup_t = work / "sup.t"
        out = home.cli(
            "run",
            "-d",
            "--json",
            "--hook",
            str(hooks),
            "--",
            sys.executable,
            str(script),
            str(lines),
            str(sup_t),
        )
        home.wait_exited(json.loads(out)["id"])
        daemon_cpu = cpu_seconds(dpid) - cpu0
        log = work / "plain.log"
        size = log.stat().st_size
        from supervisor.matching import Matcher

        data = log.read_bytes()
        t = time.perf_counter()
        Matcher(pats).scan(data, [1] * len(pats))
        scan_s = time.perf_counter() - t
        t = time.perf_counter()
        subprocess.run(
            ["grep", "-cE", "|".join(p.replace("(?i)", "") for p in pats), str(log)],
            stdout=subprocess.DEVNULL,
        )
        grep_s = time.perf_counter() - t
        return {
            "patterns": npat,
            "mb": size / 1e6,
            "child_plain_s": float(plain_t.read_text()),
            "child_supervised_s": float(sup_t.read_text()),
            "daemon_cpu_s": daemon_cpu,
            "scan_mb_s": size / 1e6 / scan_s,
            "grep_mb_s": size / 1e6 / grep_s,
        }
    finally:
        home.stop()


def latency(events: int = 100) -> dict[str, float]:
    home = Home()
    try:
        work = home.dir
        hooks = work / "lat.json"
        hooks.write_text(
            json.dumps(
                {
                    "limits": {"rate": "100000/second"},
                    "hooks": [
                        {
                            "name": "ev",
                            "on_output_match": {"pattern": "^EVENT"},
                            "instructions": "x",
                            "max_spawns": events,
                        }
                    ],
                }
            )
        )
        home.start()
        seen: dict[int, float] = {}
        stop = threading.Event()

        def observe() -> None:
            c = sqlite3.connect(work / "state.db")
            while not stop.is_set():
                for (tid,) in c.execute("select id from thread"):
                    seen.setdefault(tid, time.time())
                time.sleep(0.0005)

        child = (
            f"import time\nfor i in range({events}):\n"
            "    print('EVENT', repr(time.time()), flush=True)\n    time.sleep(0.02)\n"
        )
        obs = threading.Thread(target=observe, daemon=True)
        obs.start()
        out = home.cli(
            "run", "-d", "--json", "--hook", str(hooks), "--", sys.executable, "-c", child
        )
        pid = json.loads(out)["id"]
        home.wait_exited(pid)
        time.sleep(0.2)
        stop.set()
        obs.join()
        written = [float(x.split()[1]) for x in home.cli("logs", str(pid)).splitlines()]
        lat = sorted((seen[tid] - written[tid - 1]) * 1000 for tid in sorted(seen))
        return {
            "events": len(lat),
            "p50_ms": statistics.median(lat),
            "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        }
    finally:
        home.stop()


def launch_many(home: Home, argvs: list[list[str]], hooks: Path | None = None) -> list[int]:
    """Launch through the library (what `run -d` does, without a CLI start-up per process)."""
    os.environ["SUPERVISE_HOME"] = str(home.dir)
    from state.db import Store
    from state.paths import StatePaths
    from supervisor.hookfile import load_hook_file
    from supervisor.hookspec import HookFile
    from supervisor.launch import LaunchRequest, launch

    paths = StatePaths(home.dir)
    store = Store(paths.db)
    hf = load_hook_file(hooks) if hooks else HookFile()
    ids = []
    for argv in argvs:
        row = launch(store, paths, LaunchRequest(argv=argv, cwd=home.dir, env=home.env, hooks=hf))
        assert row.id is not None
        ids.append(row.id)
    store.close()
    return ids


def count_rows(home: Home, sql: str) -> int:
    with sqlite3.connect(home.dir / "state.db") as c:
        return int(c.execute(sql).fetchone()[0])


def scale(count: int) -> dict[str, float]:
    home = Home()
    try:
        dpid = home.start()
        launch_many(home, [["sleep", "600"]] * count)
        deadline = time.monotonic() + 60
        while count_rows(home, "select count(*) from process where state='running'") < count:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        time.sleep(2.0)  # let the daemon settle
        shims = []
        for p in (home.dir / "runs").glob("*/shim.pid"):
            with contextlib.suppress(psutil.NoSuchProcess):
                shims.append(psutil.Process(int(p.read_text())).memory_full_info().uss)
        cpu0 = cpu_seconds(dpid)
        time.sleep(5.0)
        idle = cpu_seconds(dpid) - cpu0
        t = time.perf_counter()
        home.cli("ps")
        ps_s = time.perf_counter() - t
        return {
            "processes": count,
            "shim_uss_kib_median": statistics.median(shims) / 1024,
            "daemon_rss_mib": psutil.Process(dpid).memory_info().rss / 2**20,
            "daemon_idle_cpu_s_per_5s": idle,
            "ps_ms": ps_s * 1000,
        }
    finally:
        home.stop()


def recovery(count: int) -> dict[str, float]:
    """SIGKILL the daemon with `count` processes; half end meanwhile; time the catch-up."""
    home = Home()
    try:
        hooks = home.dir / "exit.json"
        hooks.write_text(
            json.dumps(
                {
                    "limits": {"rate": "1000000/second"},
                    "hooks": [{"name": "done", "on_exit": None, "instructions": "x"}],
                }
            )
        )
        home.start()
        half = count // 2
        fifo = home.dir / "release"
        os.mkfifo(fifo)  # `cat` blocks opening it until a writer comes: one open ends them all
        launch_many(home, [["cat", str(fifo)]] * half + [["sleep", "600"]] * (count - half), hooks)
        deadline = time.monotonic() + 60
        while count_rows(home, "select count(*) from process where state='running'") < count:
            if time.monotonic() > deadline:
                raise SystemExit("processes did not all start")
            time.sleep(0.1)
        assert home.daemon is not None
        home.daemon.send_signal(signal.SIGKILL)
        home.daemon.wait(10)
        os.close(os.open(fifo, os.O_WRONLY))
        runs = home.dir / "runs"
        deadline = time.monotonic() + 60
        while sum(1 for _ in runs.glob("*/exit.json")) < half and time.monotonic() < deadline:
            time.sleep(0.1)
        t = time.perf_counter()
        home.start()
        while count_rows(home, "select count(*) from fire") < half:
            if time.perf_counter() - t > 120:
                break
            time.sleep(0.01)
        return {"processes": count, "ended_meanwhile": half, "catch_up_s": time.perf_counter() - t}
    finally:
        home.stop()


def supervisord_peer(lines: int) -> dict[str, float] | None:
    venv = Path(tempfile.gettempdir()) / "supervise-bench-supervisord"
    py = venv / "bin" / "python"
    if not py.exists():
        r = subprocess.run([sys.executable, "-m", "venv", str(venv)])
        r2 = subprocess.run(
            [str(py), "-m", "pip", "install", "-q", "supervisor"], capture_output=True
        )
        if r.returncode or r2.returncode:
            return None
    work = Path(tempfile.mkdtemp(prefix="supervisord-bench-"))
    try:
        (work / "child.py").write_text(CHILD)
        conf = work / "supervisord.conf"
        conf.write_text(
            f"[supervisord]\nnodaemon=true\nlogfile={work}/sd.log\npidfile={work}/sd.pid\n"
            f"[unix_http_server]\nfile={work}/sd.sock\n"
            f"[program:chatty]\ncommand={sys.executable} {work}/child.py {lines} {work}/sd.t\n"
            f"autorestart=false\nstartsecs=0\nstdout_logfile={work}/out.log\n"
            "stdout_logfile_maxbytes=0\nredirect_stderr=true\n"
        )
        sd = subprocess.Popen(
            [str(venv / "bin" / "supervisord"), "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300
        while not (work / "sd.t").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # let supervisord drain the pipe
        cpu = cpu_seconds(sd.pid)
        sd.send_signal(signal.SIGTERM)
        sd.wait(30)
        return {"child_s": float((work / "sd.t").read_text()), "supervisord_cpu_s": cpu}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--procs", type=int, nargs="*", default=[10, 100, 1000])
    ap.add_argument("--recovery", type=int, default=1000, help="processes in the recovery run")
    ap.add_argument("--peers", action="store_true", help="also run supervisord (pip install)")
    args = ap.parse_args()

    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": (
            f"{platform.machine()} {os.cpu_count()} cores, "
            f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}"
        ),
    }
    rows = []
    for npat, cap in ((1, None), (10, None), (100, None), (10, 0)):
        runs = [chatty(args.lines, npat, cap) for _ in range(args.runs)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        label = f"{npat} patterns" + (", max_log_bytes off" if cap == 0 else "")
        results[f"chatty_{npat}" + ("_nocap" if cap == 0 else "")] = med
        rows.append(
            (
                f"chatty {med['mb']:.0f} MB, {label}: child supervised / plain",
                f"{med['child_supervised_s'] / med['child_plain_s']:.2f}x",
                "<= 1.05x",
            )
        )
        rows.append(
            (
                f"chatty {label}: daemon CPU",
                f"{med['daemon_cpu_s']:.2f} s",
                "<= 0.5 s at 10",
            )
        )
        rows.append(
            (
                f"scan {label} vs grep -E",
                f"{med['scan_mb_s']:.0f} vs {med['grep_mb_s']:.0f} MB/s",
                ">= 0.5x grep",
            )
        )
    lat = latency()
    results["latency"] = lat
    rows.append(
        (
            "line -> thread row, p50 / p99",
            f"{lat['p50_ms']:.1f} / {lat['p99_ms']:.1f} ms",
            "p50 <= 20-50 ms",
        )
    )
    for n in args.procs:
        sc = scale(n)
        results[f"scale_{n}"] = sc
        rows.append(
            (f"{n} procs: shim USS (median)", f"{sc['shim_uss_kib_median']:.0f} KiB", "<= 1 MiB")
        )
        rows.append((f"{n} procs: daemon RSS", f"{sc['daemon_rss_mib']:.0f} MiB", ""))
        rows.append(
            (f"{n} procs: daemon CPU idle per 5 s", f"{sc['daemon_idle_cpu_s_per_5s']:.3f} s", "~0")
        )
        rows.append((f"{n} procs: supervise ps", f"{sc['ps_ms']:.0f} ms", "<= 300 ms at 1000"))
    rec = recovery(args.recovery)
    results["recovery"] = rec
    rows.append(
        (
            f"restart with {rec['processes']} tracked, {rec['ended_meanwhile']} ended: "
            "all on_exit fires committed",
            f"{rec['catch_up_s']:.2f} s",
            "<= 3 s",
        )
    )
    if args.peers:
        peer = supervisord_peer(args.lines)
        results["supervisord"] = peer
        if peer:
            plain = results["chatty_1"]["child_plain_s"]
            rows.append(("supervisord: child / plain", f"{peer['child_s'] / plain:.2f}x", "peer"))
            rows.append(
                ("supervisord: its CPU (no patterns)", f"{peer['supervisord_cpu_s']:.2f} s", "peer")
            )
    width = max(len(r[0]) for r in rows)
    print(f"# supervise core bench, {results['date']}, {results['machine']}")
    print(
        f"# medians of {args.runs} runs; "
        f"`python bench/bench_core.py{' --peers' if args.peers else ''}`"
    )
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>22}  {target}")
    (ROOT / "bench" / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
