# cython: language_level=3
# A Cython module compiled as C that uses the dlpackarray C API.
include "consumer_body.pxi"
