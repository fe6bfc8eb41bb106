"""The supervisor core's workloads; `bench/run.py` runs them (with the thread ones) and
prints the table. Each function starts its own daemon in a throwaway state dir and returns
figures; nothing here fails on a slow machine.

  write_styles  a child prints N lines (~69 bytes: 2M lines = 139 MB) in one of three write
                styles: one write per line (PYTHONUNBUFFERED=1, what most services do), Python's
                default 8 KiB buffer, 1.6 MB per write. With 10 on_output_match patterns that
                never match: its runtime supervised / writing to a plain file, in alternating
                pairs each started after a `sync`, and the daemon's CPU seconds.
  peer_styles   the same child and styles under supervisord (own venv) and pm2 (npm), paired
                with plain runs the same way: its runtime ratio and the peer's CPU.
  steady        K processes each printing R lines a second, one write per line, 5 patterns:
                the daemon's share of a core over a window; the same programs under
                supervisord; and, under that load, matching line -> thread row and process
                exit -> thread row latencies.
  scale         K sleeping processes: shim private memory (USS), daemon RSS, daemon CPU while
                idle, `supervise ps` wall time.
  recovery      SIGKILL the daemon with K processes, half end meanwhile: restart -> every
                on_exit fire committed.
  patterns      daemon CPU against pattern count (1.6 MB writes, one daemon).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
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

# ~69 bytes a line: 2,000,000 lines are 139 MB, the workload of the issue that set the targets.
CHILD = r"""
import sys, time
n, style = int(sys.argv[1]), sys.argv[3]
fmt = "2026-11-23T00:00:00.%06d INFO GET /api/v1/items 200 in 12ms %d"
t = time.perf_counter()
if style == "1.6MB":
    out = sys.stdout.buffer
    chunk = []
    for i in range(n):
        chunk.append(b"%s\n" % (fmt % (i % 1000000, i)).encode())
        if len(chunk) == 20000:
            out.write(b"".join(chunk))
            chunk.clear()
    out.write(b"".join(chunk))
else:  # "line" (PYTHONUNBUFFERED=1: one write per print) or "8k" (block-buffered)
    for i in range(n):
        print(fmt % (i % 1000000, i))
sys.stdout.flush()
open(sys.argv[2], "w").write(str(time.perf_counter() - t))
"""

# The write styles, as the tables name them.
STYLES = {
    "line": "one write per line (PYTHONUNBUFFERED=1)",
    "8k": "Python's default 8 KiB buffer",
    "1.6MB": "1.6 MB per write",
}

# A service that logs a line at a time, at `rate` lines a second (argv[1]).
STEADY_CHILD = r"""
import sys, time
dt = 1.0 / float(sys.argv[1])
t, i = time.monotonic(), 0
while True:
    i += 1
    print("2026-11-23T00:00:00 INFO GET /api/v1/items 200 in 12ms %d" % i, flush=True)
    t += dt
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)
    elif d < -1:
        t = time.monotonic()  # fell behind (a busy machine): do not burst to catch up
"""


def style_env(base: dict[str, str], style: str) -> dict[str, str]:
    """The environment a child of `style` runs with, plain or supervised alike."""
    env = {k: v for k, v in base.items() if k != "PYTHONUNBUFFERED"}
    if style == "line":
        env["PYTHONUNBUFFERED"] = "1"
    return env


def cpu_seconds(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


class Home:
    """A throwaway state dir with a real daemon."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="supervise-bench-"))
        self.env = {**os.environ, "SUPERVISE_HOME": str(self.dir), "PYTHONPATH": str(ROOT)}
        # As installed: Python caches bytecode (some sandboxes turn that off; each CLI call
        # would then compile our modules again, ~20 ms).
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
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

    def cli(self, *args: str, env: dict[str, str] | None = None) -> str:
        return subprocess.run(
            [sys.executable, "-m", "supervisor", *args],
            env=self.env if env is None else env,
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


def grep_pattern(pattern: str) -> str:
    """The same pattern for `grep -E`: `(?i)` spelled out as [xX] classes, so grep does the
    same work; `\\d` as [0-9]."""
    pattern = pattern.replace(r"\d", "[0-9]")
    if not pattern.startswith("(?i)"):
        return pattern
    return "".join(
        f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in pattern.removeprefix("(?i)")
    )


def _child(work: Path) -> Path:
    script = work / "child.py"
    if not script.exists():
        script.write_text(CHILD)
    return script


def plain_run(work: Path, lines: int, style: str, *, keep: Path | None = None) -> float:
    """The child's own runtime writing to a plain file: the baseline of every ratio.

    Its output goes to a new file, removed after (kept as `keep` if given): a file system
    filling with old runs makes each new file slower to write, so both sides start alike.
    """
    out, t = work / "plain.log", work / "plain.t"
    os.sync()  # no one else's dirty pages to write back meanwhile
    with open(out, "wb") as f:
        subprocess.run(
            [sys.executable, str(_child(work)), str(lines), str(t), style],
            stdout=f,
            env=style_env(dict(os.environ), style),
            check=True,
        )
    if keep is not None:
        out.rename(keep)
    else:
        out.unlink()
    return float(t.read_text())


def supervised_run(home: Home, work: Path, lines: int, style: str, hooks: Path) -> dict[str, float]:
    """The same child under `supervise run -d`: its runtime and the daemon's CPU seconds."""
    assert home.daemon is not None
    t = work / "sup.t"
    os.sync()
    cpu0 = cpu_seconds(home.daemon.pid)
    buffered = ["--buffered"] if style != "line" else []
    out = home.cli(
        "run", "-d", "--json", "--hook", str(hooks), *buffered, "--",
        sys.executable, str(_child(work)), str(lines), str(t), style,
        env=style_env(home.env, style),
    )  # fmt: skip
    pid = json.loads(out)["id"]
    home.wait_exited(pid)
    cpu = cpu_seconds(home.daemon.pid) - cpu0
    run = home.dir / "runs" / str(pid)
    size = (run / "output.log").stat().st_size
    for name in ("output.log", "output.log.1"):  # as the plain run's file: gone after
        (run / name).unlink(missing_ok=True)
    return {"child_s": float(t.read_text()), "daemon_cpu_s": cpu, "mb": size / 1e6}


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def write_styles(lines: int, pairs: int, npat: int = 10) -> dict[str, dict[str, Any]]:
    """Each write style in `pairs` alternating pairs (plain first, then supervised first),
    one daemon for all. Per style: the child's ratio and the daemon's CPU (median, min, max)."""
    home = Home()
    try:
        work = home.dir / "work"
        work.mkdir()
        hooks = hooks_file(work, (PATTERNS * 10)[:npat])
        home.start()
        home.warm_up(hooks)
        got: dict[str, dict[str, Any]] = {}
        for style in STYLES:
            ratios, cpus, plains, mb = [], [], [], 0.0
            for k in range(pairs):
                if k % 2 == 0:
                    plain = plain_run(work, lines, style)
                    sup = supervised_run(home, work, lines, style, hooks)
                else:
                    sup = supervised_run(home, work, lines, style, hooks)
                    plain = plain_run(work, lines, style)
                ratios.append(sup["child_s"] / plain)
                plains.append(plain)
                cpus.append(sup["daemon_cpu_s"])
                mb = sup["mb"]
            got[style] = {
                "patterns": npat,
                "mb": mb,
                "pairs": pairs,
                "child_ratio": _spread(ratios),
                "child_plain_s": _spread(plains),
                "daemon_cpu_s": _spread(cpus),
            }
        return got
    finally:
        home.stop()


def read_floor(lines: int, npat: int = 10) -> dict[str, float]:
    """The least any reader that matches patterns pays: the child's output (1.6 MB writes)
    read once from the page cache in 8 MiB preads, with no scan, then with one RE2 scan per
    pattern, in this process's CPU seconds (median of 3). Beside a peer that scans nothing,
    it shows which ratio targets no such reader can meet."""
    from supervisor.matching import Matcher

    work = Path(tempfile.mkdtemp(prefix="supervise-floor-"))
    try:
        log = work / "out.log"
        plain_run(work, lines, "1.6MB", keep=log)
        matcher = Matcher((PATTERNS * 10)[:npat])
        budget = [1 << 30] * npat

        def read_all(scan: bool) -> float:
            t0 = time.process_time()
            fd = os.open(log, os.O_RDONLY)
            try:
                at = 0
                while data := os.pread(fd, 8 << 20, at):
                    at += len(data)
                    if scan:
                        matcher.scan(data[: data.rfind(b"\n") + 1], budget)
            finally:
                os.close(fd)
            return time.process_time() - t0

        read_all(False)  # into the page cache
        return {
            "mb": log.stat().st_size / 1e6,
            "read_s": statistics.median(read_all(False) for _ in range(3)),
            "read_scan_s": statistics.median(read_all(True) for _ in range(3)),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def latency_probe(home: Home, events: int, gap_s: float = 0.05) -> dict[str, float]:
    """`events` matching lines `gap_s` apart from one more process, while whatever else runs
    on `home` goes on: line written -> thread row visible in SQLite."""
    body = {
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
    hooks = home.dir / "lat.json"
    hooks.write_text(json.dumps(body))
    child = (
        f"import time\nfor i in range({events}):\n"
        "    print('EVENT', repr(time.time()), flush=True)\n"
        f"    time.sleep({gap_s})\n"
    )
    with _ThreadRows(home, "id") as seen:
        (pid,) = launch_many(home, [[sys.executable, "-c", child]], hooks)
        home.wait_exited(pid)
        time.sleep(0.2)
    lines = (home.dir / "runs" / str(pid) / "output.log").read_text().splitlines()
    written = [float(x.split()[1]) for x in lines]
    first = min(seen) if seen else 0
    return _percentiles([(seen[t] - written[t - first]) * 1000 for t in sorted(seen)])


def exit_probe(home: Home, events: int, gap_s: float = 0.03) -> dict[str, float]:
    """`events` processes ending `gap_s` apart: exit (the shim's record) -> thread row."""
    hooks = exit_hooks(home)
    with _ThreadRows(home, "process_id") as seen:
        ids = launch_many(home, [["sleep", f"{1 + i * gap_s:.3f}"] for i in range(events)], hooks)
        for pid in ids:
            home.wait_exited(pid)
        time.sleep(0.2)
    lat = []
    for pid in ids:
        ended = json.loads((home.dir / "runs" / str(pid) / "exit.json").read_text())
        if pid in seen:
            lat.append((seen[pid] - float(ended["ended_at"])) * 1000)
    return _percentiles(lat)


class _ThreadRows:
    """Notes when each thread row (by `key`) first appears, polling SQLite every 0.5 ms in
    a thread of the bench (the product never polls)."""

    def __init__(self, home: Home, key: str) -> None:
        self.db, self.key = home.dir / "state.db", key
        self.seen: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._observe, daemon=True)

    def _observe(self) -> None:
        c = sqlite3.connect(self.db)
        while not self.stop.is_set():
            for (k,) in c.execute(f"select {self.key} from thread"):
                self.seen.setdefault(k, time.time())
            time.sleep(0.0005)

    def __enter__(self) -> dict[int, float]:
        self.thread.start()
        return self.seen

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def _percentiles(latencies_ms: list[float]) -> dict[str, float]:
    lat = sorted(latencies_ms)
    return {
        "events": len(lat),
        "p50_ms": statistics.median(lat),
        "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
    }


def launch_many(home: Home, argvs: list[list[str]], hooks: Path | None = None) -> list[int]:
    """Launch through the library (what `run -d` does, without a CLI start-up per process)."""
    os.environ["SUPERVISE_HOME"] = str(home.dir)
    from state.db import open_state_store
    from state.paths import StatePaths
    from state.settings import store_settings
    from supervisor.hookfile import load_hook_file
    from supervisor.hookspec import HookFile
    from supervisor.launch import LaunchRequest, launch

    paths = StatePaths(home.dir)
    store = open_state_store(paths.db, store_settings())
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


def refused_timeouts(home: Home) -> Path:
    """A hook file whose timeout fires once per process a second in, refused (max_depth 0):
    `supervise fires` then lists a fire per process, and no thread runs."""
    hooks = home.dir / "timeout.json"
    body = {
        "limits": {"rate": "1000000/second", "max_depth": 0},
        "hooks": [{"name": "slow", "on_timeout": {"seconds": 1}, "instructions": "x"}],
    }
    hooks.write_text(json.dumps(body))
    return hooks


def scale(count: int) -> dict[str, float]:
    home = Home()
    try:
        dpid = home.start()
        launch_many(home, [["sleep", "600"]] * count, refused_timeouts(home))
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
        ps_s = statistics.median(_timed(lambda: home.cli("ps")) for _ in range(3))
        fires_s = statistics.median(_timed(lambda: home.cli("fires")) for _ in range(3))
        return {
            "processes": count,
            "shim_uss_kib_median": statistics.median(shims) / 1024,
            "daemon_rss_mib": psutil.Process(dpid).memory_info().rss / 2**20,
            "daemon_idle_cpu_s_per_5s": idle,
            "ps_ms": ps_s * 1000,
            "fires": count_rows(home, "select count(*) from fire"),
            "fires_ms": fires_s * 1000,
        }
    finally:
        home.stop()


def exit_hooks(home: Home) -> Path:
    """A hook file with one on_exit hook for any code, and no rate limit to speak of."""
    hooks = home.dir / "exit.json"
    body = {
        "limits": {"rate": "1000000/second"},
        "hooks": [{"name": "done", "on_exit": None, "instructions": "x"}],
    }
    hooks.write_text(json.dumps(body))
    return hooks


def recovery(count: int) -> dict[str, float]:
    """SIGKILL the daemon with `count` processes; half end meanwhile; time the catch-up."""
    home = Home()
    try:
        hooks = exit_hooks(home)
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


def _wait_file(path: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _supervisord_bin() -> Path | str:
    """supervisord's bin folder, installed once into its own venv (its import name is ours
    too); or why not."""
    venv = Path(tempfile.gettempdir()) / "supervise-bench-supervisord"
    if not (venv / "bin" / "supervisord").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=False)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "supervisor"]
        if subprocess.run(pip, check=False).returncode:
            return "pip install supervisor failed (no package registry?)"
    return venv / "bin"


def _peer_env() -> dict[str, str]:
    # Without our PYTHONPATH: supervisord's `import supervisor` must find its own package.
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def supervisord_scale(count: int) -> dict[str, float] | str:
    """`count` `sleep` programs under supervisord: its RSS, idle CPU and `supervisorctl status`."""
    bin_dir = _supervisord_bin()
    if isinstance(bin_dir, str):
        return bin_dir
    work = Path(tempfile.mkdtemp(prefix="supervisord-scale-"))
    conf = work / "supervisord.conf"
    programs = "".join(
        f"[program:s{i}]\ncommand=sleep 600\nstartsecs=0\nautorestart=false\n"
        f"stdout_logfile={work}/s{i}.log\nredirect_stderr=true\n"
        for i in range(count)
    )
    conf.write_text(
        f"[supervisord]\nnodaemon=true\nlogfile={work}/sd.log\npidfile={work}/sd.pid\n"
        f"minfds={4 * count + 100}\n[unix_http_server]\nfile={work}/sd.sock\n"
        "[rpcinterface:supervisor]\n"
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n"
        f"[supervisorctl]\nserverurl=unix://{work}/sd.sock\n{programs}"
    )
    sd = subprocess.Popen(
        [str(bin_dir / "supervisord"), "-c", str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_peer_env(),
    )

    def status() -> str:
        ctl = [str(bin_dir / "supervisorctl"), "-c", str(conf), "status"]
        return subprocess.run(
            ctl, capture_output=True, text=True, check=False, env=_peer_env()
        ).stdout

    try:
        deadline = time.monotonic() + 120
        while status().count("RUNNING") < count:
            if time.monotonic() > deadline:
                return f"supervisord did not start {count} programs in 120 s"
            time.sleep(0.5)
        time.sleep(2.0)
        cpu0 = cpu_seconds(sd.pid)
        time.sleep(5.0)
        idle = cpu_seconds(sd.pid) - cpu0
        return {
            "processes": count,
            "rss_mib": psutil.Process(sd.pid).memory_info().rss / 2**20,
            "idle_cpu_s_per_5s": idle,
            "status_ms": statistics.median(_timed(status) for _ in range(3)) * 1000,
        }
    finally:
        sd.send_signal(signal.SIGTERM)
        try:
            sd.wait(60)
        except subprocess.TimeoutExpired:
            sd.kill()
        shutil.rmtree(work, ignore_errors=True)


def _supervisord_conf(work: Path, programs: str, *, autostart: bool = True) -> Path:
    conf = work / "supervisord.conf"
    conf.write_text(
        f"[supervisord]\nnodaemon=true\nlogfile={work}/sd.log\npidfile={work}/sd.pid\n"
        "minfds=4096\n"
        f"[unix_http_server]\nfile={work}/sd.sock\n"
        "[rpcinterface:supervisor]\n"
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n"
        f"[supervisorctl]\nserverurl=unix://{work}/sd.sock\n{programs}"
    )
    return conf


class _Supervisord:
    """A supervisord with its own config, started, up, and stopped on exit."""

    def __init__(self, bin_dir: Path, conf: Path) -> None:
        self.bin_dir, self.conf = bin_dir, conf
        env = _peer_env()
        env.pop("PYTHONUNBUFFERED", None)  # programs set it themselves, per style
        self.proc = subprocess.Popen(
            [str(bin_dir / "supervisord"), "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        deadline = time.monotonic() + 60
        while "refused" in self.ctl("status") or "no such file" in self.ctl("status"):
            if time.monotonic() > deadline:
                raise SystemExit("supervisord did not come up")
            time.sleep(0.1)

    def ctl(self, *args: str) -> str:
        r = subprocess.run(
            [str(self.bin_dir / "supervisorctl"), "-c", str(self.conf), *args],
            capture_output=True,
            text=True,
            check=False,
            env=_peer_env(),
        )
        return r.stdout + r.stderr

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _peer_pairs(
    pairs: int, work: Path, lines: int, style: str, run_peer: Callable[[], float]
) -> list[float]:
    ratios = []
    for k in range(pairs):
        if k % 2 == 0:
            plain = plain_run(work, lines, style)
            peer = run_peer()
        else:
            peer = run_peer()
            plain = plain_run(work, lines, style)
        ratios.append(peer / plain)
    return ratios


def supervisord_styles(lines: int, pairs: int) -> dict[str, dict[str, Any]] | str:
    """The write-styles child under supervisord (no patterns: it has none), in alternating
    pairs: the child's ratio and supervisord's CPU seconds per run. Or why it cannot run."""
    bin_dir = _supervisord_bin()
    if isinstance(bin_dir, str):
        return bin_dir
    got: dict[str, dict[str, Any]] = {}
    work = Path(tempfile.mkdtemp(prefix="supervisord-bench-"))
    try:
        for style in STYLES:
            env = 'environment=PYTHONUNBUFFERED="1"\n' if style == "line" else ""
            conf = _supervisord_conf(
                work,
                f"[program:chatty]\ncommand={sys.executable} {_child(work)} {lines} "
                f"{work}/sd.t {style}\nautostart=false\nautorestart=false\nstartsecs=0\n"
                f"stdout_logfile={work}/out.log\nstdout_logfile_maxbytes=0\n"
                f"redirect_stderr=true\n{env}",
            )
            sd = _Supervisord(bin_dir, conf)
            cpus: list[float] = []

            def one(sd: _Supervisord = sd, cpus: list[float] = cpus) -> float:
                (work / "sd.t").unlink(missing_ok=True)
                (work / "out.log").unlink(missing_ok=True)
                os.sync()
                cpu0 = cpu_seconds(sd.proc.pid)
                sd.ctl("start", "chatty")
                _wait_file(work / "sd.t")
                time.sleep(1.0)  # let it drain the pipe
                cpus.append(cpu_seconds(sd.proc.pid) - cpu0)
                return float((work / "sd.t").read_text())

            try:
                ratios = _peer_pairs(pairs, work, lines, style, one)
            finally:
                sd.close()
            got[style] = {"child_ratio": _spread(ratios), "cpu_s": _spread(cpus)}
        return got
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _pm2_bin() -> Path | str:
    """pm2, npm-installed once into a cache folder; or why not."""
    npm = shutil.which("npm")
    if npm is None:
        return "npm not found"
    prefix = Path(tempfile.gettempdir()) / "supervise-bench-pm2"
    pm2 = prefix / "node_modules" / ".bin" / "pm2"
    if not pm2.exists():
        r = subprocess.run(
            [npm, "install", "--silent", "--prefix", str(prefix), "pm2"],
            capture_output=True,
            check=False,
        )
        if r.returncode:
            return "npm install pm2 failed (no package registry?)"
    return pm2


def pm2_styles(lines: int, pairs: int) -> dict[str, dict[str, Any]] | str:
    """The write-styles child under pm2 (npm-installed into a cache folder), likewise."""
    pm2 = _pm2_bin()
    if isinstance(pm2, str):
        return pm2
    got: dict[str, dict[str, Any]] = {}
    work = Path(tempfile.mkdtemp(prefix="pm2-bench-"))
    env = {**os.environ, "PM2_HOME": str(work / "pm2home")}
    try:
        subprocess.run([str(pm2), "ping"], env=env, capture_output=True, check=True)
        god = int((work / "pm2home" / "pm2.pid").read_text())
        for style in STYLES:
            cpus: list[float] = []

            def one(style: str = style, cpus: list[float] = cpus) -> float:
                (work / "pm2.t").unlink(missing_ok=True)
                os.sync()
                cpu0 = cpu_seconds(god)
                subprocess.run(
                    [
                        *(str(pm2), "start", str(_child(work)), "--name", "chatty"),
                        *("--interpreter", sys.executable, "--no-autorestart"),
                        *("-o", str(work / "out.log"), "-e", str(work / "err.log")),
                        *("--", str(lines), str(work / "pm2.t"), style),
                    ],
                    env=style_env(env, style),
                    capture_output=True,
                    check=True,
                )
                _wait_file(work / "pm2.t")
                time.sleep(1.0)  # let pm2 drain the pipe
                cpus.append(cpu_seconds(god) - cpu0)
                subprocess.run([str(pm2), "delete", "chatty"], env=env, capture_output=True)
                (work / "out.log").unlink(missing_ok=True)
                return float((work / "pm2.t").read_text())

            ratios = _peer_pairs(pairs, work, lines, style, one)
            got[style] = {"child_ratio": _spread(ratios), "cpu_s": _spread(cpus)}
        return got
    finally:
        subprocess.run([str(pm2), "kill"], env=env, capture_output=True, check=False)
        shutil.rmtree(work, ignore_errors=True)


def _steady_script(folder: Path) -> Path:
    script = folder / "steady.py"
    script.write_text(STEADY_CHILD)
    return script


def steady(
    procs: int, rate: float, seconds: float, *, npat: int = 5, probes: int = 0
) -> dict[str, float]:
    """`procs` processes at `rate` lines/s each, one write per line, `npat` patterns that
    never match: the daemon's CPU over `seconds` (as % of one core), then, with `probes`,
    line and exit latencies measured while the load goes on."""
    home = Home()
    try:
        dpid = home.start()
        work = home.dir / "work"
        work.mkdir()
        hooks = hooks_file(work, PATTERNS[:npat])
        script = _steady_script(work)
        launch_many(home, [[sys.executable, str(script), str(rate)]] * procs, hooks)
        time.sleep(3.0)  # every child started and writing
        cpu0, t0 = cpu_seconds(dpid), time.monotonic()
        time.sleep(seconds)
        pct = (cpu_seconds(dpid) - cpu0) / (time.monotonic() - t0) * 100
        got: dict[str, Any] = {"processes": procs, "lines_per_s": rate, "daemon_core_pct": pct}
        got["daemon_rss_mib"] = psutil.Process(dpid).memory_info().rss / 2**20
        if probes:
            got["line_latency"] = latency_probe(home, probes)
            got["exit_latency"] = exit_probe(home, probes)
        return got
    finally:
        home.stop()


def supervisord_steady(procs: int, rate: float, seconds: float) -> dict[str, float] | str:
    """The same programs under supervisord, each to its own log file: its CPU share."""
    bin_dir = _supervisord_bin()
    if isinstance(bin_dir, str):
        return bin_dir
    work = Path(tempfile.mkdtemp(prefix="supervisord-steady-"))
    try:
        script = _steady_script(work)
        programs = "".join(
            f"[program:w{i}]\ncommand={sys.executable} {script} {rate}\nautorestart=false\n"
            f"startsecs=0\nstdout_logfile={work}/w{i}.log\nstdout_logfile_maxbytes=0\n"
            "redirect_stderr=true\n"
            for i in range(procs)
        )
        sd = _Supervisord(bin_dir, _supervisord_conf(work, programs))
        try:
            deadline = time.monotonic() + 60
            while sd.ctl("status").count("RUNNING") < procs and time.monotonic() < deadline:
                time.sleep(0.5)
            time.sleep(3.0)
            cpu0, t0 = cpu_seconds(sd.proc.pid), time.monotonic()
            time.sleep(seconds)
            pct = (cpu_seconds(sd.proc.pid) - cpu0) / (time.monotonic() - t0) * 100
            return {"processes": procs, "lines_per_s": rate, "core_pct": pct}
        finally:
            sd.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def patterns(lines: int, counts: list[int], runs: int) -> dict[str, Any]:
    """Daemon CPU against pattern count (1.6 MB writes), one daemon; and the matcher's scan
    rate beside `grep -E` with the same 10 patterns on the same file."""
    home = Home()
    try:
        work = home.dir / "work"
        work.mkdir()
        home.start()
        home.warm_up(hooks_file(work, PATTERNS[:1]))
        by_count = []
        for k in counts:
            folder = work / f"h{k}"
            folder.mkdir()
            hooks = hooks_file(folder, (PATTERNS * 10)[:k])
            done = [supervised_run(home, work, lines, "1.6MB", hooks) for _ in range(runs)]
            by_count.append(
                {
                    "patterns": k,
                    "mb": done[0]["mb"],
                    "daemon_cpu_s": statistics.median(d["daemon_cpu_s"] for d in done),
                }
            )
        log = work / "kept.log"
        plain_run(work, lines, "1.6MB", keep=log)
        from supervisor.matching import Matcher

        data = log.read_bytes()
        scan_s = _timed(lambda: Matcher(PATTERNS).scan(data, [1] * len(PATTERNS)))
        grep = ["grep", "-cE", "|".join(grep_pattern(p) for p in PATTERNS), str(log)]
        grep_s = _timed(lambda: subprocess.run(grep, stdout=subprocess.DEVNULL, check=False))
        mb = len(data) / 1e6
        return {"by_count": by_count, "scan_mb_s": mb / scan_s, "grep_mb_s": mb / grep_s}
    finally:
        home.stop()
