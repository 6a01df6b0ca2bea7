// paralab exec — element access shared by the verification files (verify.cpp, verify_ops.cpp):
// buffers read into doubles and doubles written back in a dtype. Internal to exec/.
#pragma once

#include <cstdint>
#include <vector>

#include "exec/backend.hpp"
#include "ir/dtype.hpp"

namespace paralab::exec::verify_detail {

// Element i of a host array of dtype t, as a double.
double load_any(const void* p, DType t, int64_t i);
// n elements of a backend buffer, copied to the host through the backend.
std::vector<double> to_doubles(Backend& be, const void* p, DType t, int64_t n);
// Values rounded to dtype t, as raw bytes.
std::vector<uint8_t> from_doubles(const std::vector<double>& v, DType t);

}  // namespace paralab::exec::verify_detail
