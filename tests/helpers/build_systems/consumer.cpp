// The same module compiled as C++17 (dlpackarray.h is valid C and C++).
#define CONSUMER_NAME consumer_cxx
#include "consumer.c"
