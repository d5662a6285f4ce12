#include "agent/agent_main.h"
#include "common/process.h"

int main(int argc, char** argv) {
  podprof::InitProcess();
  return podprof::agent::AgentMain(argc, argv);
}
