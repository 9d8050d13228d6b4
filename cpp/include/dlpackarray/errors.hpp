// Typed errors of the C++ core.  They become Python exceptions in exactly one
// place: dla::py::raise_py_error() (python_shim.hpp), used by Cython as the
// `except +` handler of every core call.
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

class Error : public std::exception {
 public:
  Error(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}
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
