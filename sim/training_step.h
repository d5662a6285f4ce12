// The training step every simulated chip runs: its kernels, with costs given as target times on
// a generation so that the roofline decides which bound each kernel hits (sim/pod_model.h's
// OpTemplate). Shared by every host of a pod; a multi-slice job adds its DCN ops to it
// (sim/dcn_program.h).
#ifndef PODPROF_SIM_TRAINING_STEP_H_
#define PODPROF_SIM_TRAINING_STEP_H_

#include <vector>

#include "sim/pod_model.h"
#include "trace/chip_catalog.h"

namespace podprof::sim {

// A transformer-like step on `generation` (see training_step.cc).
std::vector<OpTemplate> TrainingStep(const trace::ChipGeneration& generation);

}  // namespace podprof::sim

#endif  // PODPROF_SIM_TRAINING_STEP_H_
