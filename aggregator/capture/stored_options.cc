#include "aggregator/capture/stored_options.h"

#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace podprof::aggregator {

std::string StoredOptionsJson(const v1::StartCaptureRequest& req) {
  nlohmann::json j = {{"duration_ms", req.duration_ms()}};
  if (req.has_options() && req.options().ByteSizeLong() > 0) {
    google::protobuf::util::JsonPrintOptions print;
    print.preserve_proto_field_names = true;
    std::string text;
    // Printing a message without Any fields cannot fail.
    (void)google::protobuf::util::MessageToJsonString(req.options(), &text, print);
    j["options"] = nlohmann::json::parse(text, nullptr, false);
  }
  return j.dump();
}

v1::CaptureOptions OptionsFromStoredJson(const std::string& text) {
  v1::CaptureOptions options;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("options")) return options;
  google::protobuf::util::JsonParseOptions parse;
  // Written by a newer aggregator, the object may hold fields this one does not know.
  parse.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(j["options"].dump(), &options, parse).ok()) {
    options.Clear();
  }
  return options;
}

}  // namespace podprof::aggregator
