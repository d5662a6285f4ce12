#include "tools/registry.h"

#include <string>
#include <vector>

#include "tools/registry_entries.h"

namespace podprof::tools {
namespace {

using Json = nlohmann::json;

// A default given as text, as the JSON value of the parameter's type (the text itself when it
// does not parse as one: the test of the registry holds every default to its type).
Json DefaultValue(const Param& p) {
  try {
    switch (p.type) {
      case ParamType::kInteger:
        return Json(std::stoll(p.default_value));
      case ParamType::kNumber:
        return Json(std::stod(p.default_value));
      case ParamType::kBoolean:
        return Json(p.default_value == "true");
      default:
        return Json(p.default_value);
    }
  } catch (const std::exception&) {  // std::stoll / std::stod: not a number
    return Json(p.default_value);
  }
}

// The JSON Schema of one parameter's value.
Json PropertySchema(const Param& p) {
  Json s = Json::object();
  switch (p.type) {
    case ParamType::kString:
      s["type"] = "string";
      break;
    case ParamType::kInteger:
      s["type"] = "integer";
      break;
    case ParamType::kNumber:
      s["type"] = "number";
      break;
    case ParamType::kBoolean:
      s["type"] = "boolean";
      break;
    case ParamType::kStringList:
      s["type"] = "array";
      s["items"] = {{"type", "string"}};
      break;
    case ParamType::kIntegerList:
      s["type"] = "array";
      s["items"] = {{"type", "integer"}};
      break;
    case ParamType::kStringMap:
      s["type"] = "object";
      s["additionalProperties"] = {{"type", "string"}};
      break;
  }
  std::string description = p.description;
  if (p.unit == "duration") {
    description += " (a duration before now: 30s, 10m, 1h, 7d)";
  } else if (!p.unit.empty()) {
    description += " (unit: " + p.unit + ")";
  }
  s["description"] = description;
  if (!p.default_value.empty()) s["default"] = DefaultValue(p);
  return s;
}

}  // namespace

const std::vector<Tool>& Registry() {
  static const std::vector<Tool>* const kTools = new std::vector<Tool>(internal::ToolEntries());
  return *kTools;
}

const std::vector<CliShape>& CliShapes() {
  static const std::vector<CliShape>* const kShapes =
      new std::vector<CliShape>(internal::CliShapeEntries());
  return *kShapes;
}

const Tool* FindTool(std::string_view name) {
  for (const Tool& t : Registry()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string RoleName(Role r) { return r == Role::kOperator ? "operator" : "viewer"; }

std::string ParamTypeName(ParamType t) {
  switch (t) {
    case ParamType::kString:
      return "string";
    case ParamType::kInteger:
      return "integer";
    case ParamType::kNumber:
      return "number";
    case ParamType::kBoolean:
      return "boolean";
    case ParamType::kStringList:
      return "string_list";
    case ParamType::kIntegerList:
      return "integer_list";
    case ParamType::kStringMap:
      return "string_map";
  }
  return "string";
}

nlohmann::json InputSchema(const Tool& t) {
  Json properties = Json::object();
  Json required = Json::array();
  for (const Param& p : t.params) {
    properties[p.name] = PropertySchema(p);
    if (p.required) required.push_back(p.name);
  }
  return {{"type", "object"}, {"properties", properties}, {"required", required}};
}

nlohmann::json ToolJson(const Tool& t) {
  const CliShape* shape = nullptr;
  for (const CliShape& s : CliShapes()) {
    if (s.tool == t.name) shape = &s;
  }
  nlohmann::json params = nlohmann::json::array();
  for (const Param& p : t.params) {
    nlohmann::json j = {{"name", p.name},
                        {"type", ParamTypeName(p.type)},
                        {"unit", p.unit},
                        {"required", p.required},
                        {"description", p.description}};
    j["default"] = p.default_value.empty() ? nlohmann::json() : DefaultValue(p);
    params.push_back(std::move(j));
  }
  return {{"name", t.name},
          {"summary", t.summary},
          {"role", RoleName(t.role)},
          {"method", t.method},
          {"route", t.route},
          {"cli", t.cli},
          {"python", t.python},
          {"params", params},
          {"example", nlohmann::json::parse(t.example, nullptr, /*allow_exceptions=*/false)},
          {"result_keys", t.result_keys},
          {"cli_result_keys", shape ? shape->keys : t.result_keys},
          {"cli_json_is_array", shape ? shape->array : false},
          {"input_schema", InputSchema(t)}};
}

const std::vector<NotATool>& NotTools() {
  static const std::vector<NotATool>* const kNot =
      new std::vector<NotATool>(internal::NotToolEntries());
  return *kNot;
}

}  // namespace podprof::tools
