"""The supervisor core's workloads; `bench/run.py` runs them (with the thread ones) and
prints the table. Each function starts its own daemon in a throwaway state dir and returns
figures; nothing here fails on a slow machine.

  chatty        a child prints N lines (~79 bytes each) with K on_output_match patterns: its
                runtime supervised / writing to a plain file, the daemon's CPU seconds, and the
                matcher's scan throughput beside `grep -E` with the same patterns, same file.
  latency       100 matching lines 20 ms apart: line written -> thread row visible in SQLite.
  exit_latency  100 processes ending 30 ms apart: exit -> thread row visible.
  scale         K sleeping processes: shim private memory (USS), daemon RSS, daemon CPU while
                idle, `supervise ps` wall time.
  recovery      SIGKILL the daemon with K processes, half end meanwhile: restart -> every
                on_exit fire committed.
  peers         the chatty child under supervisord (own venv) and pm2 (npm), paired with a
                plain run each time.
  growth        daemon CPU against output volume and against pattern count, one daemon.
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


def grep_pattern(pattern: str) -> str:
    """The same pattern for `grep -E`: `(?i)` spelled out as [xX] classes, so grep does the
    same work; `\\d` as [0-9]."""
    pattern = pattern.replace(r"\d", "[0-9]")
    if not pattern.startswith("(?i)"):
        return pattern
    return "".join(
        f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in pattern.removeprefix("(?i)")
    )


def write_plain(work: Path, lines: int, *, keep: bool = False) -> float:
    """The child's own runtime writing to a plain file: the baseline of every ratio.

    The child's script is left in `work/child.py`; with `keep`, its output in `plain.log`.
    """
    script = work / "child.py"
    script.write_text(CHILD)
    plain_t = work / "plain.t"
    os.sync()  # each child starts with no one else's dirty pages to write back
    with open(work / "plain.log", "wb") as f:
        subprocess.run(
            [sys.executable, str(script), str(lines), str(plain_t)], stdout=f, check=True
        )
    if not keep:
        (work / "plain.log").unlink()
    return float(plain_t.read_text())


def chatty(lines: int, npat: int, max_log_bytes: int | None = None) -> dict[str, float]:
    home = Home()
    if max_log_bytes is not None:
        home.env["SUPERVISE_MAX_LOG_BYTES"] = str(max_log_bytes)
    try:
        work = home.dir / "work"
        work.mkdir()
        plain_s = write_plain(work, lines, keep=True)
        script = work / "child.py"
        pats = (PATTERNS * 10)[:npat]
        hooks = hooks_file(work, pats)
        dpid = home.start()
        home.warm_up(hooks)
        os.sync()
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
            ["grep", "-cE", "|".join(grep_pattern(p) for p in pats), str(log)],
            stdout=subprocess.DEVNULL,
        )
        grep_s = time.perf_counter() - t
        return {
            "patterns": npat,
            "mb": size / 1e6,
            "child_plain_s": plain_s,
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
        return _percentiles([(seen[tid] - written[tid - 1]) * 1000 for tid in sorted(seen)])
    finally:
        home.stop()


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
        ps_s = statistics.median(_timed(lambda: home.cli("ps")) for _ in range(3))
        return {
            "processes": count,
            "shim_uss_kib_median": statistics.median(shims) / 1024,
            "daemon_rss_mib": psutil.Process(dpid).memory_info().rss / 2**20,
            "daemon_idle_cpu_s_per_5s": idle,
            "ps_ms": ps_s * 1000,
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


def exit_latency(events: int = 100) -> dict[str, float]:
    """`events` processes ending 30 ms apart: exit (the shim's record) -> thread row visible."""
    home = Home()
    try:
        hooks = exit_hooks(home)
        home.start()
        seen: dict[int, float] = {}
        stop = threading.Event()

        def observe() -> None:
            c = sqlite3.connect(home.dir / "state.db")
            while not stop.is_set():
                for (proc,) in c.execute("select process_id from thread"):
                    seen.setdefault(proc, time.time())
                time.sleep(0.0005)

        obs = threading.Thread(target=observe, daemon=True)
        obs.start()
        ids = launch_many(home, [["sleep", f"{1 + i * 0.03:.2f}"] for i in range(events)], hooks)
        for pid in ids:
            home.wait_exited(pid)
        time.sleep(0.2)
        stop.set()
        obs.join()
        lat = []
        for pid in ids:
            ended = json.loads((home.dir / "runs" / str(pid) / "exit.json").read_text())
            if pid in seen:
                lat.append((seen[pid] - float(ended["ended_at"])) * 1000)
        return _percentiles(lat)
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


def supervisord_peer(lines: int, runs: int) -> dict[str, float] | str:
    """The chatty child under supervisord. Each run is paired with a plain run just before
    it. Returns why not, if it cannot run."""
    bin_dir = _supervisord_bin()
    if isinstance(bin_dir, str):
        return bin_dir
    ratios, cpus = [], []
    for _ in range(runs):
        work = Path(tempfile.mkdtemp(prefix="supervisord-bench-"))
        try:
            plain = write_plain(work, lines)
            conf = work / "supervisord.conf"
            conf.write_text(
                f"[supervisord]\nnodaemon=true\nlogfile={work}/sd.log\npidfile={work}/sd.pid\n"
                f"[unix_http_server]\nfile={work}/sd.sock\n"
                f"[program:chatty]\ncommand={sys.executable} {work}/child.py {lines} {work}/sd.t\n"
                f"autorestart=false\nstartsecs=0\nstdout_logfile={work}/out.log\n"
                "stdout_logfile_maxbytes=0\nredirect_stderr=true\n"
            )
            os.sync()
            sd = subprocess.Popen(
                [str(bin_dir / "supervisord"), "-c", str(conf)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=_peer_env(),
            )
            _wait_file(work / "sd.t")
            time.sleep(1.0)  # let supervisord drain the pipe
            cpus.append(cpu_seconds(sd.pid))
            sd.send_signal(signal.SIGTERM)
            sd.wait(30)
            ratios.append(float((work / "sd.t").read_text()) / plain)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return {"child_ratio": statistics.median(ratios), "cpu_s": statistics.median(cpus)}


def pm2_peer(lines: int, runs: int) -> dict[str, float] | str:
    """The chatty child under pm2, installed with npm into a cache folder, if npm is here."""
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
    ratios, cpus = [], []
    for _ in range(runs):
        work = Path(tempfile.mkdtemp(prefix="pm2-bench-"))
        env = {**os.environ, "PM2_HOME": str(work / "pm2home")}
        try:
            plain = write_plain(work, lines)
            os.sync()
            subprocess.run(
                [
                    *(str(pm2), "start", str(work / "child.py"), "--name", "chatty"),
                    *("--interpreter", sys.executable, "--no-autorestart"),
                    *("-o", str(work / "out.log"), "-e", str(work / "err.log")),
                    *("--", str(lines), str(work / "pm2.t")),
                ],
                env=env,
                capture_output=True,
                check=True,
            )
            _wait_file(work / "pm2.t")
            time.sleep(1.0)  # let pm2 drain the pipe
            god = int((work / "pm2home" / "pm2.pid").read_text())
            cpus.append(cpu_seconds(god))
            ratios.append(float((work / "pm2.t").read_text()) / plain)
        finally:
            subprocess.run([str(pm2), "kill"], env=env, capture_output=True, check=False)
            shutil.rmtree(work, ignore_errors=True)
    return {"child_ratio": statistics.median(ratios), "cpu_s": statistics.median(cpus)}


def growth(
    volumes: list[int], pattern_counts: list[int], base_lines: int, runs: int
) -> dict[str, list[dict[str, float]]]:
    """Daemon CPU against output volume (10 patterns) and against pattern count.

    One daemon for the whole series; each point is the median CPU delta of `runs` children.
    """
    home = Home()
    try:
        work = home.dir / "work"
        work.mkdir()
        script = work / "child.py"
        script.write_text(CHILD)
        dpid = home.start()
        home.warm_up(hooks_file(work, PATTERNS[:1]))

        def point(lines: int, npat: int) -> float:
            folder = work / f"h{npat}"
            folder.mkdir(exist_ok=True)
            hooks = hooks_file(folder, (PATTERNS * 10)[:npat])
            cpus = []
            for _ in range(runs):
                cpu0 = cpu_seconds(dpid)
                out = home.cli(
                    "run", "-d", "--json", "--hook", str(hooks), "--", sys.executable,
                    str(script), str(lines), str(work / "t"),
                )  # fmt: skip
                home.wait_exited(json.loads(out)["id"])
                cpus.append(cpu_seconds(dpid) - cpu0)
            return statistics.median(cpus)

        mb_per_line = 158.88889 / 2_000_000
        return {
            "by_volume": [
                {"mb": n * mb_per_line, "patterns": 10, "daemon_cpu_s": point(n, 10)}
                for n in volumes
            ],
            "by_patterns": [
                {
                    "mb": base_lines * mb_per_line,
                    "patterns": k,
                    "daemon_cpu_s": point(base_lines, k),
                }
                for k in pattern_counts
            ],
        }
    finally:
        home.stop()
