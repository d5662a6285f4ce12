// The flight recorder's states by name: the one table of them. The agent sends its state as
// RecorderStatus.recorder_state (an enum) and, for aggregators and clients older than that
// field, by name in RecorderStatus.state; every reader asks RecorderStateOf (the enum, or the
// name an older agent sent) and prints RecorderStateText, so that the CLI, the HTTP API, the CSV
// and the agent's logs say the same words as before the enum.
//
// Header-only, so that every library that may include proto/ may include it (the agent, the
// aggregator's capture engine, report/ and the CLI).
#ifndef PODPROF_PROTO_RECORDER_STATES_H_
#define PODPROF_PROTO_RECORDER_STATES_H_

#include <cstddef>
#include <string>

#include "proto/podprof_types.pb.h"

namespace podprof::v1 {

// Each state's name, indexed by the enum's value: "" for UNSPECIFIED (nothing said).
inline constexpr const char* kRecorderStateNames[] = {"",     "off",    "armed",   "unsupported",
                                                      "busy", "failed", "disabled"};
static_assert(sizeof(kRecorderStateNames) / sizeof(kRecorderStateNames[0]) ==
                  static_cast<size_t>(RecorderState_MAX) + 1,
              "a name for every RecorderState");

// `s`'s name from kRecorderStateNames; "" for UNSPECIFIED or a value this build does not know.
inline const char* RecorderStateName(RecorderState s) {
  const auto i = static_cast<size_t>(s);
  return i < sizeof(kRecorderStateNames) / sizeof(kRecorderStateNames[0]) ? kRecorderStateNames[i]
                                                                          : "";
}

// The state `name` names; UNSPECIFIED for "" and for a name not in the table.
inline RecorderState RecorderStateNamed(const std::string& name) {
  for (int i = RecorderState_MIN + 1; i <= RecorderState_MAX; ++i) {
    if (name == kRecorderStateNames[i]) return static_cast<RecorderState>(i);
  }
  return RECORDER_STATE_UNSPECIFIED;
}

// The state `r` says: its recorder_state, or from an agent older than that field the state
// named by its `state` string; UNSPECIFIED when neither says one (no recorder reported).
inline RecorderState RecorderStateOf(const RecorderStatus& r) {
  return r.recorder_state() != RECORDER_STATE_UNSPECIFIED ? r.recorder_state()
                                                          : RecorderStateNamed(r.state());
}

// What is printed for `r`'s state: the name of its recorder_state, or from an older agent its
// `state` string as sent (a name this build may not know among them); "" when none was reported.
inline std::string RecorderStateText(const RecorderStatus& r) {
  return r.recorder_state() != RECORDER_STATE_UNSPECIFIED ? RecorderStateName(r.recorder_state())
                                                          : r.state();
}

// Sets `r`'s state both ways: the enum, and the deprecated name for older readers.
inline void SetRecorderState(RecorderState s, RecorderStatus* r) {
  r->set_recorder_state(s);
  r->set_state(RecorderStateName(s));
}

}  // namespace podprof::v1

#endif  // PODPROF_PROTO_RECORDER_STATES_H_
