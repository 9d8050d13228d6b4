"""Dask distributed as the scale-out engine: DLPackArrays through a LocalCluster of processes.

The cluster (2 worker processes, 1 thread each) starts and stops inside the test.
Arrays travel by pickle protocol 5 with out-of-band buffers (distributed's
"pickle" serializer); the workers size them with dlpackarray's ``dask.sizeof``
entry point, so the scheduler accounts their real bytes.
"""

from __future__ import annotations

import importlib.metadata

import numpy as np
import process_workers
import pytest
from conftest import assert_clean_exit, require, run_python

from dlpackarray import DLPackArray
from dlpackarray._pickle import byte_extent


def test_sizeof_is_registered_through_the_entry_point():
    require("dask", "the dask.sizeof entry point")
    names = [ep.value for ep in importlib.metadata.entry_points(group="dask.sizeof")]
    assert "dlpackarray._dask:register" in names
    from dask.sizeof import sizeof

    x = DLPackArray(np.zeros((1000, 100), np.float32))
    assert sizeof(x) == 400_000
    assert sizeof(x[:, ::2]) == byte_extent(x[:, ::2]) == 4 * (999 * 100 + 98 + 1)
    # A broadcast array counts its few real bytes, not its logical size.
    assert sizeof(DLPackArray(np.broadcast_to(np.arange(4.0), (2**40, 4)))) == 32
    assert sizeof(DLPackArray(np.zeros((0, 7)))) == 0


IMPORT_ORDERS = [
    "import dlpackarray, distributed",
    "import distributed, dlpackarray",
    "import dask, dlpackarray; from distributed.protocol.serialize import serialize",
    "from distributed.protocol.serialize import serialize; import dlpackarray",
    "import dask.sizeof, dlpackarray, distributed.protocol",
]


@pytest.mark.parametrize("imports", IMPORT_ORDERS)
def test_distributed_serializes_with_the_dask_family_in_any_import_order(imports):
    # The "dask" family (header + the span as one frame) is what keeps arrays out of
    # the pickle on distributed's protocol-4 routes (through the scheduler).
    require("distributed", "Dask's distributed scheduler")
    code = (
        f"{imports}\n"
        "import numpy as np\n"
        "from distributed.protocol import serialize, deserialize\n"
        "from dlpackarray import DLPackArray\n"
        "x = DLPackArray(np.arange(12.0).reshape(3, 4))[::-1, ::2]\n"
        "header, frames = serialize(x, context={'pickle-protocol': 4})\n"
        "assert header['serializer'] == 'dask', header\n"
        "assert len(frames) == 1 and memoryview(frames[0]).nbytes == 88, frames\n"
        "y = deserialize(header, frames)\n"
        "assert y.tolist() == x.tolist() and y.strides == x.strides and not y.readonly\n"
        "assert np.shares_memory(np.asarray(y), np.asarray(x))  # no copy in-process\n"
    )
    assert_clean_exit(run_python(code), imports)


def test_dask_alone_imports_no_distributed():
    require("dask", "the dask.sizeof entry point")
    code = (
        "import sys, dask.sizeof, numpy as np, dlpackarray\n"
        "assert dask.sizeof.sizeof(dlpackarray.DLPackArray(np.zeros(10))) == 80\n"
        "assert 'distributed' not in sys.modules\n"
    )
    assert_clean_exit(run_python(code))


def test_dask_family_round_trips_every_layout():
    require("distributed", "Dask's distributed scheduler")
    from distributed.protocol import deserialize, serialize

    ro = np.arange(6.0)
    ro.flags.writeable = False
    for x in [
        DLPackArray(np.arange(60, dtype=np.int64).reshape(3, 4, 5)[::-1, 1::2, ::-2]),
        DLPackArray(ro),
        DLPackArray(np.broadcast_to(np.int8(1), (10**4, 3))),
        DLPackArray(np.arange(16, dtype=np.uint16)).view("bfloat16")[::3],
        DLPackArray(np.array(1 + 2j)),
        DLPackArray(np.zeros((2, 0), np.uint8)),
    ]:
        header, frames = serialize(x)
        assert header["serializer"] == "dask"
        assert memoryview(frames[0]).nbytes == process_workers.shipped_bytes(x)
        for received in (frames, [bytes(memoryview(f)) for f in frames]):
            y = deserialize(header, received)
            assert process_workers.describe(y) == process_workers.describe(x)
        with pytest.raises(ValueError, match="cannot unpickle a DLPackArray"):
            deserialize(header, [b"\0" * (memoryview(frames[0]).nbytes - 1)] if x.size else
                        [b"", b""])  # fmt: skip


class Tagged(DLPackArray):
    """A subclass with an instance attribute."""


def test_subclasses_go_through_the_pickle_family():
    """distributed serializes a DLPackArray subclass with pickle, which keeps its
    type and attributes; the plain type keeps the "dask" family."""
    require("distributed", "Dask's distributed scheduler")
    from distributed.protocol import deserialize, serialize

    x = Tagged(np.arange(6.0)[::2])
    x.unit = "m"
    header, frames = serialize(x)
    assert header["serializer"] == "pickle"
    y = deserialize(header, frames)
    assert type(y) is Tagged and y.unit == "m" and y.tolist() == [0.0, 2.0, 4.0]
    assert serialize(DLPackArray(np.arange(3)))[0]["serializer"] == "dask"


def test_scatter_submit_map_gather_on_a_local_cluster():
    require("distributed", "Dask's distributed scheduler")
    import cloudpickle
    from distributed import Client, LocalCluster

    # The workers receive the functions by value: no test module needs importing there.
    cloudpickle.register_pickle_by_value(process_workers)
    ro = np.arange(40, dtype=np.int32).reshape(5, 8)
    ro.flags.writeable = False
    arrays = [
        DLPackArray(np.random.default_rng(0).standard_normal((512, 256))),  # 1 MiB
        DLPackArray(np.arange(60, dtype=np.int64).reshape(3, 4, 5)[::-1, 1::2, ::-2]),
        DLPackArray(ro),
        DLPackArray(np.broadcast_to(np.arange(3.0), (10**4, 3))),
        DLPackArray(np.arange(16, dtype=np.uint16)).view("bfloat16")[::3],
        DLPackArray(np.array(True)),
    ]
    expected = [process_workers.describe(x) for x in arrays]
    try:
        with (
            LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                worker_dashboard_address=None,
            ) as cluster,
            Client(cluster) as client,
        ):
            futures = client.scatter(arrays)
            # The scheduler accounts the bytes each array spans (dask.sizeof in the
            # workers): what was sent, the span or a dense copy of wide-gap views.
            nbytes = client.nbytes(summary=False)
            shipped = [process_workers.shipped_bytes(x) for x in arrays]
            assert [nbytes[f.key] for f in futures] == shipped
            echoed = client.gather([client.submit(process_workers.identity, f) for f in futures])
            seen = client.gather(client.map(process_workers.describe, futures))
            # Arrays made on a worker come back too.
            remote = client.submit(lambda: DLPackArray(np.arange(5.0))[::-1]).result()
            # The workers serialize DLPackArrays with the "dask" family too.
            families = client.run(
                lambda: __import__("distributed").protocol.serialize(DLPackArray(b"ab"))[0][
                    "serializer"
                ]
            )
            assert set(families.values()) == {"dask"}
    finally:
        cloudpickle.unregister_pickle_by_value(process_workers)
    for want, y, got in zip(expected, echoed, seen, strict=True):
        # Bit-exact, with layout, dtype and flags (a readonly array arrives readonly,
        # a writable one writable: distributed keeps the writeable flag of each buffer).
        assert process_workers.describe(y) == want
        assert got[:4] == want[:4] and got[5] == want[5]
        assert type(y) is DLPackArray
    assert remote.tolist() == [4.0, 3.0, 2.0, 1.0, 0.0]
