"""A PySpark (4.x) data source for Kafka topics served by kbroker (or any Kafka 2.8-compatible cluster), named
`kbroker`, with the options and the schema of Spark's own Kafka source and sink:

    from kbroker.spark import register
    register(spark)                                   # once per SparkSession
    df = (spark.read.format("kbroker")               # format("kafka") is Spark's own, so the name differs
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "events").load())

It reaches the cluster only through the Kafka protocol (kbroker.protocol and kafka-python's messages), so it
runs wherever Spark's Python workers run, with no JVM Kafka connector. Those workers must be able to import it:
see register().
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings

from .source import KBrokerDataSource

# What a worker imports to run the source: its planner, readers and writers, with their dependencies.
WORKER_MODULES = tuple(f"{__name__}.{m}" for m in ("source", "reader", "stream", "writer"))


class WorkerPythonError(RuntimeError):
    """Spark's Python workers would run a Python that cannot import this data source."""


def register(spark) -> None:
    """Make `format("kbroker")` known to this SparkSession.

    Spark's Python workers run PYSPARK_PYTHON, or `python3` from PATH when it is unset - often the system
    Python, without kbroker's dependencies, where every read would fail with "No module named 'crc32c'". With a
    local master (workers on this machine) the worker Python is checked first. If PYSPARK_PYTHON is unset and
    the default cannot import the source, the source runs on this driver's Python instead (Spark takes a data
    source's worker Python from SparkContext.pythonExec when it is registered) and a warning says to set
    PYSPARK_PYTHON; if PYSPARK_PYTHON names a Python that cannot import it, WorkerPythonError says so. Other
    masters' executors are not visible from here: PYSPARK_PYTHON must name a Python with kbroker on them.
    """
    try:
        sc = spark.sparkContext
    except Exception:                    # a Spark Connect session: its workers are the server's business
        sc = None
    problem = worker_python_problem(sc) if sc is not None and sc.master.startswith("local") else None
    if problem is None:
        spark.dataSource.register(KBrokerDataSource)
        return
    if os.environ.get("PYSPARK_PYTHON"):
        raise WorkerPythonError(
            f"Spark's Python workers run PYSPARK_PYTHON={os.environ['PYSPARK_PYTHON']}, which cannot import the "
            f"kbroker data source ({problem}). Set PYSPARK_PYTHON to a Python that has kbroker and its "
            f"dependencies, such as this one, before the SparkSession is created: "
            f"export PYSPARK_PYTHON={sys.executable}")
    warnings.warn(
        f"PYSPARK_PYTHON is not set, so Spark's Python workers run `{sc.pythonExec}` from PATH, which cannot "
        f"import the kbroker data source ({problem}); the kbroker source runs on this driver's Python "
        f"({sys.executable}) instead. Set PYSPARK_PYTHON={sys.executable} before the SparkSession is created "
        f"so that your own Python functions run there too.", RuntimeWarning, stacklevel=2)
    configured, sc.pythonExec = sc.pythonExec, sys.executable
    try:
        spark.dataSource.register(KBrokerDataSource)
    finally:
        sc.pythonExec = configured


def worker_python_problem(sc) -> str | None:
    """Why the Python that Spark starts for this SparkContext's workers cannot import the data source (its
    error's last line), or None when it can. The check runs that Python as Spark would: same environment,
    PYTHONPATH with Spark's own Python path first, same working directory."""
    found = shutil.which(sc.pythonExec)
    if found is None:
        return f"{sc.pythonExec!r} is not found"
    if _same_python(found, sys.executable):
        return None
    path = os.pathsep.join(p for p in (sc._jvm.PythonUtils.sparkPythonPath(), sc.environment.get("PYTHONPATH"),
                                       os.environ.get("PYTHONPATH")) if p)
    try:
        probe = subprocess.run([found, "-c", "import " + ", ".join(WORKER_MODULES)],
                               env={**os.environ, **sc.environment, "PYTHONPATH": path},
                               capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{found}: {e}"
    if probe.returncode == 0:
        return None
    lines = probe.stderr.strip().splitlines()
    return lines[-1] if lines else f"{found} exited with {probe.returncode}"


def _same_python(a: str, b: str) -> bool:
    """One interpreter in one environment: e.g. a virtualenv's bin/python3 and bin/python (the same binary
    outside that directory would lack the environment's packages)."""
    a, b = os.path.abspath(a), os.path.abspath(b)
    return a == b or (os.path.dirname(a) == os.path.dirname(b) and os.path.realpath(a) == os.path.realpath(b))


__all__ = ["KBrokerDataSource", "WorkerPythonError", "register", "worker_python_problem"]
