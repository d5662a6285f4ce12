// The aggregator's answers keep names from outside (kernel names read from an imported XSpace,
// host names, agents' warnings, labels) in proto3 `string` fields, which must hold UTF-8: a
// client's protobuf refuses to parse an answer that does not (`podprof import` failed on its
// own answer). Rather than escape at each of the dozens of places a name is copied into an
// answer, an answer is checked once, whole, just before it leaves, and only an answer that
// holds bad bytes is rewritten (common/utf8.h EscapeInvalidUtf8: each bad byte as `\xNN`).
#ifndef PODPROF_AGGREGATOR_API_UTF8_FIELDS_H_
#define PODPROF_AGGREGATOR_API_UTF8_FIELDS_H_

#include <google/protobuf/message.h>

namespace podprof::aggregator {

// Rewrites every `string` field of `message` and of the messages inside it (repeated fields
// and map keys and values too; `bytes` fields are left alone) that is not valid UTF-8 with
// EscapeInvalidUtf8. Returns whether anything changed. Reads without writing when all is valid
// (the common case). Not thread-safe for one message.
bool EscapeInvalidUtf8Fields(google::protobuf::Message* message);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_API_UTF8_FIELDS_H_
