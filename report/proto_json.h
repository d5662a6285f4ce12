// API messages as JSON for `--format json`: field names as in the .proto, every field present
// (zeros too), enums by name, and 64-bit integers as JSON numbers. protobuf's own JSON printer
// writes 64-bit integers as strings ("1210"), which scripts then have to convert.
#ifndef PODPROF_REPORT_PROTO_JSON_H_
#define PODPROF_REPORT_PROTO_JSON_H_

#include "google/protobuf/message.h"
#include "nlohmann/json_fwd.hpp"

namespace podprof::report {

// Bytes fields are base64, as protobuf's JSON mapping has them; maps become objects.
nlohmann::json ProtoToJson(const google::protobuf::Message& message);

}  // namespace podprof::report

#endif  // PODPROF_REPORT_PROTO_JSON_H_
