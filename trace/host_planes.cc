#include "trace/host_planes.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trace/wire.h"
#include "trace/xspace_schema.h"

namespace podprof::trace {
namespace {

using wire::Cursor;
using wire::Span;
using wire::WireType;
using xspace::MapEntryField;
using xspace::XEventField;
using xspace::XEventMetadataField;
using xspace::XLineField;
using xspace::XPlaneField;
using xspace::XSpaceField;

// The Python tracer names its events "$file.py:LINE function" or "$module function".
constexpr char kPythonEventMark = '$';

enum class HostPlane { kNone, kThreads, kPython };

// Where a host plane's lines and event metadata are (the name may come anywhere in it).
struct PlaneFields {
  HostPlane kind = HostPlane::kNone;
  std::vector<int64_t> lines, event_metadata;
};

absl::Status ScanPlane(Cursor plane, PlaneFields* out) {
  while (!plane.done()) {
    uint32_t field;
    WireType wt;
    RETURN_IF_ERROR(plane.ReadTag(&field, &wt));
    if (field == XPlaneField::kName && wt == wire::kLengthDelimited) {
      std::string name;
      RETURN_IF_ERROR(plane.ReadString(&name));
      if (name == xspace::kHostCpuPlane) out->kind = HostPlane::kThreads;
      if (name == xspace::kPythonTracerPlane) out->kind = HostPlane::kPython;
      // Any other plane is skipped whole, its lines unread.
      if (out->kind == HostPlane::kNone) return absl::OkStatus();
      continue;
    }
    if ((field == XPlaneField::kLines || field == XPlaneField::kEventMetadata) &&
        wt == wire::kLengthDelimited) {
      (field == XPlaneField::kLines ? out->lines : out->event_metadata).push_back(plane.pos());
    }
    RETURN_IF_ERROR(plane.Skip(wt));
  }
  return absl::OkStatus();
}

// The id of one event_metadata map entry, when its event is a Python function's.
absl::Status PythonMetadataId(Cursor entry, absl::flat_hash_set<uint64_t>* python) {
  uint64_t key = 0;
  bool is_python = false;
  while (!entry.done()) {
    uint32_t field;
    WireType wt;
    RETURN_IF_ERROR(entry.ReadTag(&field, &wt));
    if (field == MapEntryField::kKey && wt == wire::kVarint) {
      RETURN_IF_ERROR(entry.ReadVarint(&key));
    } else if (field == MapEntryField::kValue && wt == wire::kLengthDelimited) {
      Cursor value(nullptr, 0, 0, "");
      RETURN_IF_ERROR(entry.ReadSub("XEventMetadata", &value));
      while (!value.done()) {
        RETURN_IF_ERROR(value.ReadTag(&field, &wt));
        if (field == XEventMetadataField::kName && wt == wire::kLengthDelimited) {
          std::string name;
          RETURN_IF_ERROR(value.ReadString(&name));
          is_python = !name.empty() && name[0] == kPythonEventMark;
        } else {
          RETURN_IF_ERROR(value.Skip(wt));
        }
      }
    } else {
      RETURN_IF_ERROR(entry.Skip(wt));
    }
  }
  if (is_python) python->insert(key);
  return absl::OkStatus();
}

// The event's metadata id (0 when it has none).
absl::StatusOr<uint64_t> EventMetadataId(Span ev) {
  while (!ev.done()) {
    uint32_t field;
    WireType wt;
    if (!ev.ReadTag(&field, &wt)) return wire::MalformedAt(ev.offset(), "bad XEvent");
    if (field == XEventField::kMetadataId && wt == wire::kVarint) {
      uint64_t id;
      if (!ev.ReadVarint(&id)) return wire::MalformedAt(ev.offset(), "bad XEvent.metadata_id");
      return id;
    }
    if (!ev.Skip(wt)) return wire::MalformedAt(ev.offset(), "bad XEvent field");
  }
  return 0;
}

class Census {
 public:
  explicit Census(ByteSource& source) : window_(&source) {}

  absl::StatusOr<HostPlanes> Run() {
    if (window_.size() == 0) return absl::InvalidArgumentError("empty file: no XSpace in it");
    Cursor space(&window_, 0, window_.size(), "XSpace");
    while (!space.done() && !Done()) {
      uint32_t field;
      WireType wt;
      RETURN_IF_ERROR(space.ReadTag(&field, &wt));
      if (field != XSpaceField::kPlanes || wt != wire::kLengthDelimited) {
        RETURN_IF_ERROR(space.Skip(wt));
        continue;
      }
      Cursor plane(nullptr, 0, 0, "");
      RETURN_IF_ERROR(space.ReadSub("XPlane", &plane));
      PlaneFields fields;
      RETURN_IF_ERROR(ScanPlane(plane, &fields));
      if (fields.kind != HostPlane::kNone) RETURN_IF_ERROR(ReadPlane(plane, fields));
    }
    return out_;
  }

 private:
  // Both kinds found: nothing more to learn.
  bool Done() const { return out_.thread_events && out_.python_events; }

  absl::Status ReadPlane(const Cursor& plane, const PlaneFields& fields) {
    const bool all_python = fields.kind == HostPlane::kPython;
    if (!all_python) out_.host_plane = true;
    Cursor c = plane;
    absl::flat_hash_set<uint64_t> python;
    for (int64_t pos : fields.event_metadata) {
      c.Seek(pos);
      Cursor entry(nullptr, 0, 0, "");
      RETURN_IF_ERROR(c.ReadSub("XPlane.event_metadata", &entry));
      RETURN_IF_ERROR(PythonMetadataId(entry, &python));
    }
    for (size_t i = 0; i < fields.lines.size() && !Done(); ++i) {
      c.Seek(fields.lines[i]);
      Cursor line(nullptr, 0, 0, "");
      RETURN_IF_ERROR(c.ReadSub("XLine", &line));
      RETURN_IF_ERROR(ReadLine(line, all_python, python));
    }
    return absl::OkStatus();
  }

  absl::Status ReadLine(Cursor line, bool all_python, const absl::flat_hash_set<uint64_t>& python) {
    while (!line.done() && !Done()) {
      uint32_t field;
      WireType wt;
      RETURN_IF_ERROR(line.ReadTag(&field, &wt));
      if (field != XLineField::kEvents || wt != wire::kLengthDelimited) {
        RETURN_IF_ERROR(line.Skip(wt));
        continue;
      }
      if (all_python) {
        out_.python_events = true;
        return line.Skip(wt);
      }
      // Without Python metadata every event is a thread's: no need to read it.
      if (python.empty()) {
        out_.thread_events = true;
        return absl::OkStatus();
      }
      Span ev;
      RETURN_IF_ERROR(line.ReadSpan(&ev));
      ASSIGN_OR_RETURN(const uint64_t id, EventMetadataId(ev));
      (python.contains(id) ? out_.python_events : out_.thread_events) = true;
    }
    return absl::OkStatus();
  }

  wire::Window window_;
  HostPlanes out_;
};

}  // namespace

absl::StatusOr<HostPlanes> ReadHostPlanes(ByteSource& source) { return Census(source).Run(); }

absl::StatusOr<HostPlanes> ReadHostPlanesFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<FileSource> source, FileSource::Open(path));
  absl::StatusOr<HostPlanes> planes = ReadHostPlanes(*source);
  if (!planes.ok()) {
    return absl::Status(planes.status().code(),
                        absl::StrCat(path, ": ", planes.status().message()));
  }
  return planes;
}

}  // namespace podprof::trace
