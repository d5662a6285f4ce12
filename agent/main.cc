#include "agent/agent_main.h"

int main(int argc, char** argv) { return podprof::agent::AgentMain(argc, argv); }
