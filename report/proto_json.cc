#include "report/proto_json.h"

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace podprof::report {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using Json = nlohmann::json;

// Whether a 64-bit field is an identifier (`program_id`, `collective_id`, `hlo_text_hash`):
// those are written as strings, since a JavaScript number keeps only 53 bits of them.
bool IsId64(const FieldDescriptor* f) {
  const std::string& n = f->name();
  return absl::EndsWith(n, "_id") || absl::EndsWith(n, "_hash");
}

// One value of `field`: element `index` of a repeated field, or the field itself when -1.
Json ValueJson(const Message& m, const FieldDescriptor* f, int index) {
  const Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64: {
      const int64_t v = rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f);
      return IsId64(f) ? Json(absl::StrCat(v)) : Json(v);
    }
    case FieldDescriptor::CPPTYPE_UINT32:
      return rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64: {
      const uint64_t v = rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
      return IsId64(f) ? Json(absl::StrCat(v)) : Json(v);
    }
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f);
    case FieldDescriptor::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int v = rep ? r->GetRepeatedEnumValue(m, f, index) : r->GetEnumValue(m, f);
      const auto* value = f->enum_type()->FindValueByNumber(v);
      // An enum value this build does not know stays a number, as in protobuf's JSON.
      return value != nullptr ? Json(value->name()) : Json(v);
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string s = rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
      return f->type() == FieldDescriptor::TYPE_BYTES ? absl::Base64Escape(s) : s;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ProtoToJson(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return nullptr;
}

// A map field: its entries are messages of key (field 1) and value (field 2).
Json MapJson(const Message& m, const FieldDescriptor* f) {
  Json j = Json::object();
  const Reflection* r = m.GetReflection();
  for (int i = 0; i < r->FieldSize(m, f); ++i) {
    const Message& entry = r->GetRepeatedMessage(m, f, i);
    const FieldDescriptor* key = f->message_type()->map_key();
    const FieldDescriptor* value = f->message_type()->map_value();
    Json k = ValueJson(entry, key, -1);
    j[k.is_string() ? k.get<std::string>() : k.dump()] = ValueJson(entry, value, -1);
  }
  return j;
}

}  // namespace

Json ProtoToJson(const Message& message) {
  Json j = Json::object();
  const google::protobuf::Descriptor* d = message.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_map()) {
      j[f->name()] = MapJson(message, f);
    } else if (f->is_repeated()) {
      Json a = Json::array();
      for (int k = 0; k < message.GetReflection()->FieldSize(message, f); ++k) {
        a.push_back(ValueJson(message, f, k));
      }
      j[f->name()] = std::move(a);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
               !message.GetReflection()->HasField(message, f)) {
      j[f->name()] = nullptr;  // an absent message, told apart from an empty one
    } else {
      j[f->name()] = ValueJson(message, f, -1);
    }
  }
  return j;
}

}  // namespace podprof::report
