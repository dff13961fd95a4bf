// Signal handlers that only record the signal (async-signal-safe).
#include "stop_signals.h"

#include <csignal>

namespace ftcore::train {

namespace {

volatile std::sig_atomic_t g_received = 0;
struct sigaction g_previous_int, g_previous_term;

void on_signal(int signal) {
  if (g_received != 0 && signal == SIGINT) {
    // Asked twice: stop now.
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
    return;
  }
  g_received = signal;
}

}  // namespace

StopSignals::StopSignals() {
  g_received = 0;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
}

int StopSignals::received() { return g_received; }

}  // namespace ftcore::train
