# cython: language_level=3
# ``cimport dlpackarray`` for other Cython projects: the DLPack ABI structs and
# the DLPackArray extension type.  Compile such a module as C++ with
# ``dlpackarray.get_include()`` on the include path.  (C-level functions of
# the core come with the C-level API; for now the type and the ABI are it.)
from dlpackarray.abi cimport (
    DLDataType, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion,
    DLTensor, kDLPackMajorVersion, kDLPackMinorVersion,
)
from dlpackarray._array cimport DLPackArray
