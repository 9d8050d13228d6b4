// Typed errors of the C++ core.  They become Python exceptions in exactly one
// place: dla::py::raise_py_error() (python_shim.hpp), used by Cython as the
// `except +` handler of every core call.
//
// The core is one shared library (libdlpackarray_core): Error has an
// out-of-line destructor (errors.cpp), so its vtable and type info exist once,
// there, and are exported even to modules compiled with hidden visibility.
#pragma once

#include <exception>
#include <string>
#include <utility>

namespace dla {

enum class ErrorKind {
  Buffer,          // BufferError: data not representable / not exportable as asked
  Value,           // ValueError: a bad value (shape, stride, extent, version)
  Type,            // TypeError: a bad type (dtype, format, structured data)
  NotImplemented,  // NotImplementedError: valid request this build cannot serve
  Overflow,        // OverflowError: sizes beyond int64
  Memory,          // MemoryError: allocation failed
  Index,           // IndexError: an index outside a dimension, too many indices
};

#if defined(__GNUC__)
#define DLA_CORE_TYPE __attribute__((visibility("default")))
#else
#define DLA_CORE_TYPE
#endif

class DLA_CORE_TYPE Error : public std::exception {
 public:
  Error(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}
  ~Error() override;  // the key function: defined once, in errors.cpp
  ErrorKind kind() const noexcept { return kind_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  ErrorKind kind_;
  std::string message_;
};

[[noreturn]] inline void fail(ErrorKind kind, std::string message) {
  throw Error(kind, std::move(message));
}

}  // namespace dla
