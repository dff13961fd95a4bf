// SIGINT and SIGTERM during training: the first one asks the trainer to
// finish the current step, save a checkpoint and exit with 128 + signal
// (130 or 143); a second SIGINT ends the process at once.
#pragma once

namespace ftcore::train {

// Installs the handlers for the scope's lifetime (the previous ones come back after).
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The signal received so far, or 0.
  static int received();
};

}  // namespace ftcore::train
