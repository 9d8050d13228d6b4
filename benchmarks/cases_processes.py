"""B12: across processes -- pickle round trips and a Dask distributed round trip, 64 MiB.

Each case pits a DLPackArray against the NumPy array it wraps, the same
statement for both (docs/processes.md):

* out-of-band: ``pickle.loads(pickle.dumps(x, protocol=5, buffer_callback=...),
  buffers=...)``; both sides share the memory, so this is the per-call overhead.
* in-band: the same at protocol 5 without a callback: the bytes are copied into
  the pickle and out again.
* default protocol: ``pickle.dumps(x)`` (protocol 4 up to Python 3.13, what
  multiprocessing uses); reported, no target.
* Dask: ``scatter`` + ``submit(identity)`` + ``gather`` on one LocalCluster of 2
  worker processes (1 thread each), started by the case and stopped after it.
"""

from __future__ import annotations

from benchmarks.harness import Case, Contender, Target

MB = 1 << 20
NBYTES = 64 * MB

OUT_OF_BAND = "b = []; loads(dumps({x}, protocol=5, buffer_callback=b.append), buffers=b)"
IN_BAND = "loads(dumps({x}, protocol=5))"
DEFAULT = "loads(dumps({x}))"
DASK = "client.gather(client.submit(identity, client.scatter({x}, hash=False)))"


def _arrays() -> dict:
    import pickle

    import numpy as np

    import dlpackarray

    a = np.random.default_rng(0).standard_normal(NBYTES // 8)
    return {"a": a, "d": dlpackarray.DLPackArray(a), "dumps": pickle.dumps, "loads": pickle.loads}


def _dask_setup() -> dict:
    from distributed import Client, LocalCluster
    from toolz import identity  # a Dask dependency the workers import by name

    ns = _arrays()
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        worker_dashboard_address=None,
    )
    ns.update(cluster=cluster, client=Client(cluster), identity=identity)
    return ns


def _dask_teardown(ns: dict) -> None:
    ns["client"].close()
    ns["cluster"].close()


def _pair(stmt: str, note: str) -> list[Contender]:
    return [
        Contender("dlpackarray", stmt.format(x="d"), note),
        Contender("numpy", stmt.format(x="a"), "the same statement on the wrapped ndarray"),
    ]


def cases() -> list[Case]:
    # No case is `big`: a big case gets a handful of samples, too few on a shared
    # machine for ratios near 1 (each is 40 single calls instead).
    return [
        Case(
            family="B12",
            name="B12/pickle-out-of-band/64MB",
            title="pickle protocol 5 round trip, buffers out-of-band (no copy), 64 MiB float64",
            setup=_arrays,
            contenders=_pair(OUT_OF_BAND, "one PickleBuffer of the span, viewed on loads"),
            anchor="numpy",
            params={"x": NBYTES},
            targets=[Target("dlpackarray", "numpy", "<=", 1.05)],
        ),
        Case(
            family="B12",
            name="B12/pickle-in-band/64MB",
            title="pickle protocol 5 round trip without buffer_callback (bytes in-band)",
            setup=_arrays,
            contenders=_pair(IN_BAND, "the span as BYTEARRAY8, viewed on loads"),
            anchor="numpy",
            params={"x": NBYTES},
            targets=[Target("dlpackarray", "numpy", "<=", 1.05)],
        ),
        Case(
            family="B12",
            name="B12/pickle-default-protocol/64MB",
            title="pickle.dumps default protocol (4 before Python 3.14) round trip",
            setup=_arrays,
            contenders=_pair(
                DEFAULT,
                "bytes unpickled as a bytearray: one copy more than "
                "NumPy, which writes into the unpickled bytes object",
            ),
            anchor="numpy",
            params={"x": NBYTES},
        ),
        Case(
            family="B12",
            name="B12/dask-scatter-submit-gather/64MB",
            title="Dask LocalCluster (2 processes): scatter + submit(identity) + gather",
            setup=_dask_setup,
            teardown=_dask_teardown,
            contenders=_pair(DASK, "pickle serializer family, buffers out-of-band"),
            anchor="numpy",
            params={"x": NBYTES},
            targets=[Target("dlpackarray", "numpy", "<=", 1.1)],
        ),
    ]
