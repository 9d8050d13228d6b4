#include "dlpackarray/errors.hpp"

namespace dla {

// The key function of Error: its vtable and type info are emitted here only.
Error::~Error() = default;

}  // namespace dla
