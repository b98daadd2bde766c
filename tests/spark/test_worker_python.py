"""register(spark) and the Python that Spark starts for its workers.

A user outside the checkout runs the driver on the venv's Python without PYSPARK_PYTHON: Spark's workers then
run `python3` from PATH, here the system Python without kbroker's dependencies. In a separate process set up
exactly so (PATH's python3 is /usr/bin/python3, PYSPARK_PYTHON unset, working directory outside the checkout),
register() warns and runs the source on the driver's Python, and a read succeeds. With PYSPARK_PYTHON naming
such a Python, register() refuses with WorkerPythonError saying what to set. register() checks only with a local
master (a cluster's executors are not visible from the driver), so both run in that process's local[1] session,
not in the tests' session on the standalone cluster."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from kbroker.spark import worker_python_problem
from tests.spark.conftest import make_topic, produce, unique

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYSTEM_PYTHON = "/usr/bin/python3"


def _system_python_lacks_deps():
    if not os.path.exists(SYSTEM_PYTHON):
        pytest.skip(f"{SYSTEM_PYTHON} does not exist")
    if subprocess.run([SYSTEM_PYTHON, "-c", "import crc32c, pyarrow, pyspark"], capture_output=True).returncode == 0:
        pytest.skip(f"{SYSTEM_PYTHON} has kbroker.spark's dependencies: nothing to detect")


def test_the_test_sessions_workers_can_import_the_source(spark):
    assert worker_python_problem(spark.sparkContext) is None


DRIVER = textwrap.dedent("""
    import os, sys, warnings
    from pyspark.sql import SparkSession
    from kbroker.spark import WorkerPythonError, register

    spark = (SparkSession.builder.master("local[1]").appName("kbroker-worker-python")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "512m")
             .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    print("workers:", spark.sparkContext.pythonExec)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        register(spark)
    for w in caught:
        print("warning:", w.message)
    df = (spark.read.format("kbroker").option("kafka.bootstrap.servers", sys.argv[1])
          .option("subscribe", sys.argv[2]).load())
    print("values:", sorted(bytes(r.value).decode() for r in df.select("value").collect()))
    os.environ["PYSPARK_PYTHON"] = spark.sparkContext.pythonExec = sys.argv[3]
    try:
        register(spark)
    except WorkerPythonError as e:
        print("refused:", e)
    spark.stop()
""")


def test_worker_python_without_the_dependencies_falls_back_to_the_driver_or_is_refused(kcluster, tmp_path):
    _system_python_lacks_deps()
    topic = make_topic(kcluster, unique("workers"), partitions=2)
    produce(kcluster.bootstrap, topic, [(i % 2, None, f"v{i}".encode(), 0, None) for i in range(4)])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(SYSTEM_PYTHON, bin_dir / "python3")          # what `python3` is for a user without the venv active
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)  # this checkout
    run = subprocess.run([sys.executable, "-c", DRIVER, kcluster.bootstrap, topic, SYSTEM_PYTHON], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr[-5000:]
    out = run.stdout
    assert "workers: python3" in out
    assert "warning: PYSPARK_PYTHON is not set" in out and "No module named" in out
    assert f"PYSPARK_PYTHON={sys.executable}" in out
    assert "values: ['v0', 'v1', 'v2', 'v3']" in out
    refused = out[out.index("refused:"):]                 # PYSPARK_PYTHON set to such a Python: refused
    assert f"PYSPARK_PYTHON={SYSTEM_PYTHON}" in refused and "No module named" in refused
    assert f"export PYSPARK_PYTHON={sys.executable}" in refused
