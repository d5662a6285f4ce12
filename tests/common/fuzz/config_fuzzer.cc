// libFuzzer entry point for the configuration loader both daemons use: any bytes must parse to
// a ConfigFile or a clean Status, and every getter on any key must answer without crashing.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = podprof::ConfigFile::Parse(absl::string_view(reinterpret_cast<const char*>(data), size),
                                      "<fuzz>");
  if (!f.ok()) return 0;
  f->CheckKnownKeys({"listen", "labels.*", "tls.cert", "limits.max_message_bytes"}).IgnoreError();
  for (const char* key : {"listen", "a", "a.b", "a.b.c", "labels", "tls.cert", "limits", ""}) {
    int64_t i64 = 0;
    int32_t i32 = 0;
    double d = 0;
    bool b = false;
    std::string s;
    std::vector<std::string> list;
    std::map<std::string, std::string> map;
    f->GetInt(key, &i64).IgnoreError();
    f->GetInt(key, &i32).IgnoreError();
    f->GetDouble(key, &d).IgnoreError();
    f->GetBool(key, &b).IgnoreError();
    f->GetString(key, &s).IgnoreError();
    f->GetDurationNs(key, &i64).IgnoreError();
    f->GetStringList(key, &list).IgnoreError();
    f->GetStringMap(key, &map).IgnoreError();
  }
  return 0;
}
