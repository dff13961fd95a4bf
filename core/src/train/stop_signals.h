// SIGINT and SIGTERM during `ftcore run` (installed for all of it, from data
// preparation to the final save): the first one asks the run to stop where
// it is (ftcore/stop_request.h), save a checkpoint when a step completed
// since the last one, and exit with 128 + signal (130 or 143); a second
// SIGINT ends the process at once, saying so on stderr.
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
