// Entry point of podprof-agent: the per-host capture daemon.
#ifndef PODPROF_AGENT_AGENT_MAIN_H_
#define PODPROF_AGENT_AGENT_MAIN_H_

namespace podprof::agent {

// Parses flags and runs the program; returns the process exit code. Lives in the library, not
// in main.cc, so integration tests can run it.
int AgentMain(int argc, char** argv);

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_AGENT_MAIN_H_
