"""One GPU per Dask worker (issue 14; validation.cluster.PinGPU and its rule): the mapping
worker -> GPU as a pure function on fake GPU counts, the plugin's effect on a worker's
environment, and that dask_client and the sweep install it when a CUDA device is asked for.

No GPU is needed: the plugin only sets ``CUDA_VISIBLE_DEVICES``, which torch reads when it
first uses CUDA; the GPU count is faked.
"""

from __future__ import annotations

import importlib
import math
import os
from types import SimpleNamespace

import numpy as np
import pytest
import xarray as xr

from validation.cluster import (
    GPU_VARIABLE,
    PinGPU,
    PinThreads,
    dask_client,
    gpu_for_worker,
    pins_gpus,
    visible_gpus,
    worker_index,
    worker_plugins,
)
from validation.sweep import sweep

cluster_module = importlib.import_module("validation.cluster")


@pytest.mark.parametrize(("workers", "gpus", "expected"), [
    (1, 1, ["0"]),
    (2, 2, ["0", "1"]),
    (4, 2, ["0", "1", "0", "1"]),
    (5, 3, ["0", "1", "2", "0", "1"]),
    (2, 8, ["0", "1"]),
    (3, ["3", "5"], ["3", "5", "3"]),
    (2, ["GPU-aa", "GPU-bb"], ["GPU-aa", "GPU-bb"]),
])
def test_worker_i_gets_gpu_i_mod_g(workers, gpus, expected):
    assert [gpu_for_worker(i, gpus) for i in range(workers)] == expected


@pytest.mark.parametrize("gpus", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("workers", [1, 2, 5, 8, 16])
def test_round_robin_balances_the_gpus(workers, gpus):
    load = np.bincount([int(gpu_for_worker(i, gpus)) for i in range(workers)], minlength=gpus)
    assert load.max() == math.ceil(workers / gpus)  # no GPU holds more than its share
    assert load.max() - load.min() <= 1
    assert (load > 0).sum() == min(workers, gpus)  # every GPU used while workers last


def test_visible_gpus_and_worker_index():
    assert visible_gpus({}, 3) == ["0", "1", "2"]
    assert visible_gpus({}, 0) == []
    assert visible_gpus({GPU_VARIABLE: "2, 3"}, 8) == ["2", "3"]  # the variable wins
    assert visible_gpus({GPU_VARIABLE: ""}, 8) == []
    assert [worker_index(n) for n in (0, 3, "5", "node1-2", "gpu-node-11")] == [0, 3, 5, 2, 11]
    assert worker_index("tcp://127.0.0.1:8786") is None
    assert worker_index(-1) is None
    assert pins_gpus("cuda") and not pins_gpus("cuda:1") and not pins_gpus("cpu")
    assert not pins_gpus(None)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: gpu_for_worker(-1, 2), "index must be >= 0"),
    (lambda: gpu_for_worker(0, 0), "gpus must name at least one GPU"),
    (lambda: gpu_for_worker(0, []), "gpus must name at least one GPU"),
    (lambda: visible_gpus({}, -1), "count must be >= 0"),
    (lambda: PinGPU(0), "gpus must be >= 1"),
])
def test_bad_gpu_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(("name", "environ", "gpus", "expected"), [
    (0, None, 2, "0"),
    (3, None, 2, "1"),
    ("host-4", "4,6,7", 2, "6"),  # the worker's own CUDA_VISIBLE_DEVICES, not the count
    (1, "5", 4, "5"),  # already pinned: setting up again keeps its GPU
])
def test_plugin_sets_the_workers_gpu(name, environ, gpus, expected, monkeypatch):
    if environ is None:
        monkeypatch.delenv(GPU_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(GPU_VARIABLE, environ)
    PinGPU(gpus).setup(SimpleNamespace(name=name))
    assert os.environ[GPU_VARIABLE] == expected


def test_plugin_leaves_a_worker_without_index_alone(monkeypatch):
    monkeypatch.setenv(GPU_VARIABLE, "0,1")
    with pytest.warns(RuntimeWarning, match="left as they are"):
        PinGPU(2).setup(SimpleNamespace(name="tcp://10.0.0.1:4000"))
    assert os.environ[GPU_VARIABLE] == "0,1"


def test_worker_plugins_follow_the_device():
    def kinds(**kw):
        return [type(p) for p in worker_plugins(processes=True, threads=1, **kw)]

    assert kinds(device="cuda", gpus=2) == [PinThreads, PinGPU]
    assert worker_plugins(processes=True, threads=1, device="cuda", gpus=3)[1].gpus == 3
    assert kinds(device="cuda:1", gpus=2) == [PinThreads]  # an explicit GPU is used as given
    assert kinds(device="cpu", gpus=2) == [PinThreads]
    assert kinds(device=None, gpus=2) == [PinThreads]
    assert kinds(device="cuda", gpus=0) == [PinThreads]  # no GPU: nothing to pin
    assert worker_plugins(processes=False, threads=1, device="cuda", gpus=2) == []


def _gpu_of(dask_worker) -> tuple:
    return dask_worker.name, os.environ.get(GPU_VARIABLE)


def test_local_worker_processes_get_one_gpu_each(monkeypatch):
    monkeypatch.delenv(GPU_VARIABLE, raising=False)
    monkeypatch.setattr(cluster_module, "cuda_device_count", lambda: 2)  # a fake 2-GPU host
    with dask_client(workers=2, device="cuda") as client:
        seen = dict(client.run(_gpu_of).values())
    assert seen == {0: "0", 1: "1"}
    assert GPU_VARIABLE not in os.environ  # this process is left as it was


def cell(a: float, rng: np.random.Generator) -> xr.Dataset:
    return xr.Dataset({"value": ((), a + rng.standard_normal())})


def test_sweep_hands_the_device_to_the_cluster(monkeypatch):
    asked = []
    real = cluster_module.dask_client

    def recording(**kw):
        asked.append(kw.get("device"))
        return real(**kw)

    monkeypatch.setattr(cluster_module, "dask_client", recording)
    out = sweep(cell, {"a": [0.0, 1.0]}, workers=2, processes=False, progress=False,
                device="cuda")
    assert asked == ["cuda"]
    ref = sweep(cell, {"a": [0.0, 1.0]}, workers=1, progress=False)
    np.testing.assert_array_equal(out["value"].values, ref["value"].values)
