// A stop asked for by SIGINT or SIGTERM while `ftcore run` works (it installs
// the handlers: core/src/train/stop_signals.h). The training loop looks after
// every step; the long loops around it (data preparation, evaluation,
// generation, quantization and calibration, the micro-batches of a step) call
// throw_if_stop_requested() once per unit of work (a row, a batch, a token, a
// layer), so a signal acts within seconds in any of them. The trainer catches
// StopRequested and saves a checkpoint when a step completed since the last
// one; outside training `ftcore run` reports it and exits 128 + signal.
#pragma once

#include <stdexcept>
#include <string>

namespace ftcore {

class StopRequested : public std::runtime_error {
 public:
  StopRequested(int signal, std::string phase);
  int signal() const { return signal_; }
  const std::string& phase() const { return phase_; }

 private:
  int signal_;
  std::string phase_;
};

// SIGINT or SIGTERM when one came since the handlers were installed, else 0
// (always 0 outside `ftcore run`).
int stop_signal_received();

// Throws StopRequested naming `phase` ("evaluation", "data preparation") when a signal came.
void throw_if_stop_requested(const char* phase);

// "SIGINT", "SIGTERM".
std::string signal_name(int signal);

}  // namespace ftcore
