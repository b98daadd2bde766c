"""A Spark standalone cluster on this machine: one master and N workers started from the deploy classes the
pyspark package ships (`pyspark/bin/spark-class org.apache.spark.deploy.master.Master` / `...worker.Worker`,
nothing downloaded), for the Spark tests, bench.spark_read and anyone trying `--master spark://...` locally.

    with StandaloneCluster(workers=2, tmp_dir) as spark_cluster:
        SparkSession.builder.master(spark_cluster.url)...

Everything binds 127.0.0.1 on free ports (the master's web UI too: its `/json` page is how readiness is seen,
the master up and every worker registered ALIVE). Daemons get 128 MB heaps (SPARK_DAEMON_MEMORY); each worker
offers `cores` cores and `memory` for executors; logs (one per process) and the workers' work dirs go under
`directory`. Executors inherit the workers' environment, so PYTHONPATH (a checkout) reaches their Python workers.
`add_worker()` starts one more worker while applications run (the master gives running applications executors
on it): bench.spark_read measures one worker, then two, in one run. Stopped by pid (SIGTERM, then SIGKILL).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request

from ..cluster import free_port, wait_until

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_class() -> str:
    """The spark-class script of the installed pyspark package."""
    import pyspark
    return os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")


class StandaloneCluster:
    """A master and `workers` workers of `cores` cores and `memory` each, on 127.0.0.1."""

    def __init__(self, workers: int, directory: str, cores: int = 1, memory: str = "1g", timeout: float = 60.0):
        self.directory, self.cores, self.memory, self.timeout = directory, cores, memory, timeout
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: dict[str, subprocess.Popen] = {}
        self.workers = workers

    def __enter__(self) -> StandaloneCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _launch(self, name: str, *args: str) -> subprocess.Popen:
        env = {**os.environ, "SPARK_DAEMON_MEMORY": "128m", "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_DAEMON_JAVA_OPTS": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"}
        with open(os.path.join(self.directory, f"{name}.log"), "ab") as log:
            process = subprocess.Popen([spark_class(), *args], stdout=log, stderr=subprocess.STDOUT, env=env,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        self.processes[name] = process
        return process

    def start(self) -> None:
        self.launch()
        self.wait_workers(self.workers)

    def launch(self) -> None:
        """Start the daemons without waiting for them (wait_workers() does): the caller can start other things
        while their JVMs boot."""
        os.makedirs(self.directory, exist_ok=True)
        self._launch("master", MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port),
                     "--webui-port", str(self.ui_port))
        for _ in range(self.workers):
            self._start_worker()

    def _start_worker(self) -> None:
        n = sum(name.startswith("worker-") for name in self.processes) + 1
        work_dir = os.path.join(self.directory, f"worker-{n}")
        os.makedirs(work_dir, exist_ok=True)
        self._launch(f"worker-{n}", WORKER_CLASS, "--host", "127.0.0.1", "--port", str(free_port()),
                     "--webui-port", str(free_port()), "--cores", str(self.cores), "--memory", self.memory,
                     "--work-dir", work_dir, self.url)

    def add_worker(self) -> None:
        """One more worker, registered ALIVE when this returns."""
        self._start_worker()
        self.workers += 1
        self.wait_workers(self.workers)

    def state(self) -> dict | None:
        """The master's `/json` page (workers, applications), None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json", timeout=2) as r:
                return json.load(r)
        except (OSError, ValueError):
            return None

    def wait_workers(self, n: int) -> None:
        """Until the master lists n ALIVE workers; a daemon that exits meanwhile fails at once (its log named)."""
        def ready():
            for name, p in self.processes.items():
                if p.poll() is not None:
                    raise RuntimeError(f"Spark {name} exited with {p.returncode}: see "
                                       f"{os.path.join(self.directory, name + '.log')}")
            state = self.state()
            return state is not None and sum(w["state"] == "ALIVE" for w in state["workers"]) >= n
        wait_until(ready, self.timeout, interval=0.2, message=f"{n} ALIVE Spark workers at {self.url}")

    def pids(self, prefix: str = "") -> list[int]:
        """The daemons' pids (those named with `prefix`)."""
        return [p.pid for name, p in self.processes.items() if name.startswith(prefix)]

    def stop(self) -> None:
        """Workers first (they stop their executors), then the master; SIGKILL what outlives 10 s, and what is
        left in their sessions."""
        for name in sorted(self.processes, key=lambda n: n == "master"):
            p = self.processes[name]
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 10
        for p in self.processes.values():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            try:
                os.killpg(p.pid, signal.SIGKILL)          # what it started in its session: executors it left
            except ProcessLookupError:
                pass
