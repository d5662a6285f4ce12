// The real captures (fixtures) and small protobuf wire-format builders, for the tests of the
// trace reader and of everything that reads captures (stream, insight, cli, fleet, storage).
#ifndef PODPROF_TESTS_UTIL_TRACE_FIXTURES_H_
#define PODPROF_TESTS_UTIL_TRACE_FIXTURES_H_

#include <cstdint>
#include <string>

#include "tests/util/files.h"
#include "trace/varint.h"

namespace podprof::testing {

inline std::string FixturePath(const std::string& name) {
  return std::string(PODPROF_FIXTURES_DIR) + "/" + name;
}
inline const char* kTpuFixture = "tpu_v6e_4chip_host_offload.xplane.pb";
inline const char* kGpuFixture = "gpu_8xv100_34.83.195.179_6003.xplane.pb";

inline void PutTag(uint32_t field, uint32_t wire_type, std::string* out) {
  trace::PutVarint((uint64_t{field} << 3) | wire_type, out);
}

// A length-delimited field.
inline std::string LengthField(uint32_t field, const std::string& body) {
  std::string out;
  PutTag(field, 2, &out);
  trace::PutVarint(body.size(), &out);
  return out + body;
}

inline std::string VarintField(uint32_t field, uint64_t v) {
  std::string out;
  PutTag(field, 0, &out);
  trace::PutVarint(v, &out);
  return out;
}

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_UTIL_TRACE_FIXTURES_H_
