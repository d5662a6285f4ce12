// Entry point of podprof-agent: the per-host capture daemon.
#ifndef PODPROF_AGENT_AGENT_MAIN_H_
#define PODPROF_AGENT_AGENT_MAIN_H_

namespace podprof::agent {

// Parses flags and the config file, serves until SIGTERM/SIGINT (SIGHUP reloads), and returns
// the process exit code: 0 after a clean drain, 2 for bad configuration, 1 when a listening
// address cannot be bound. Lives in the library, not in main.cc, so tests can run it.
int AgentMain(int argc, char** argv);

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_AGENT_MAIN_H_
