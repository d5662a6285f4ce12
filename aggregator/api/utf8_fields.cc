#include "aggregator/api/utf8_fields.h"

#include <string>
#include <vector>

#include "common/utf8.h"

namespace podprof::aggregator {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Whether every string field of `m`, at any depth, is valid UTF-8: read-only, so that a valid
// answer (the common case) is never touched (a map field read through reflection for writing
// would be converted to its repeated form).
bool AllValid(const Message& m) {
  const Reflection* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->type() == FieldDescriptor::TYPE_STRING) {
      std::string scratch;
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(m, f); ++i) {
          if (!IsValidUtf8(r->GetRepeatedStringReference(m, f, i, &scratch))) return false;
        }
      } else if (!IsValidUtf8(r->GetStringReference(m, f, &scratch))) {
        return false;
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(m, f); ++i) {
          if (!AllValid(r->GetRepeatedMessage(m, f, i))) return false;
        }
      } else if (!AllValid(r->GetMessage(m, f))) {
        return false;
      }
    }
  }
  return true;
}

void EscapeAll(Message* m) {
  const Reflection* r = m->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*m, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->type() == FieldDescriptor::TYPE_STRING) {
      std::string scratch;
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*m, f); ++i) {
          const std::string& v = r->GetRepeatedStringReference(*m, f, i, &scratch);
          if (!IsValidUtf8(v)) r->SetRepeatedString(m, f, i, EscapeInvalidUtf8(v));
        }
      } else if (const std::string& v = r->GetStringReference(*m, f, &scratch); !IsValidUtf8(v)) {
        r->SetString(m, f, EscapeInvalidUtf8(v));
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*m, f); ++i) {
          if (!AllValid(r->GetRepeatedMessage(*m, f, i)))
            EscapeAll(r->MutableRepeatedMessage(m, f, i));
        }
      } else if (!AllValid(r->GetMessage(*m, f))) {
        EscapeAll(r->MutableMessage(m, f));
      }
    }
  }
}

}  // namespace

bool EscapeInvalidUtf8Fields(Message* message) {
  if (AllValid(*message)) return false;
  EscapeAll(message);
  return true;
}

}  // namespace podprof::aggregator
