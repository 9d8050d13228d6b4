# cython: language_level=3
# distutils: language = c++
# The same module compiled as C++.
include "consumer_body.pxi"
