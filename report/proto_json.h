// API messages as JSON for `--format json`: field names as in the .proto, every field present
// (zeros too), enums by name, 64-bit counts, times and durations as JSON numbers, and 64-bit
// identifiers (fields named `*_id` or `*_hash`: program ids, collective ids, HLO fingerprints)
// as decimal strings. protobuf's own JSON printer writes every 64-bit integer as a string,
// which scripts then have to convert; an id, though, is only compared, and as a number a
// browser (JavaScript's doubles) would round 6513147179871253105 to 6513147179871253000.
#ifndef PODPROF_REPORT_PROTO_JSON_H_
#define PODPROF_REPORT_PROTO_JSON_H_

#include "google/protobuf/message.h"
#include "nlohmann/json_fwd.hpp"

namespace podprof::report {

// Bytes fields are base64, as protobuf's JSON mapping has them; maps become objects.
nlohmann::json ProtoToJson(const google::protobuf::Message& message);

}  // namespace podprof::report

#endif  // PODPROF_REPORT_PROTO_JSON_H_
