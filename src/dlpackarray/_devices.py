"""DLPack device types as an :class:`enum.IntEnum` (values from DLDeviceType)."""

from __future__ import annotations

import enum

__all__ = ["DLDeviceType"]


class DLDeviceType(enum.IntEnum):
    """Device type codes of the DLPack ABI, as returned by ``__dlpack_device__``."""

    CPU = 1
    CUDA = 2
    CPU_PINNED = 3
    OPENCL = 4
    VULKAN = 7
    METAL = 8
    VPI = 9
    ROCM = 10
    ROCM_HOST = 11
    EXT_DEV = 12
    CUDA_MANAGED = 13
    ONE_API = 14
    WEBGPU = 15
    HEXAGON = 16
    MAIA = 17
    TRN = 18
