// Signal handlers that only record the signal (async-signal-safe), and the
// stop request the phases of a run poll (ftcore/stop_request.h).
#include "stop_signals.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>

#include "ftcore/stop_request.h"

namespace ftcore {

namespace {

volatile std::sig_atomic_t g_received = 0;
struct sigaction g_previous_int, g_previous_term;

void on_signal(int signal) {
  if (g_received != 0 && signal == SIGINT) {
    // Asked twice: stop now. Checkpoints are written to checkpoint-N.tmp and
    // renamed, so the last complete one stays whole whatever is cut here.
    static const char message[] =
        "\nftcore: second SIGINT: exiting now without saving; the last complete checkpoint is intact\n";
    [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, message, sizeof message - 1);
    ::_exit(128 + SIGINT);
  }
  g_received = signal;
}

// FTCORE_FAULT_SIGNAL_IN=<phase>: the process sends itself SIGTERM the first
// time it polls in that phase, so tests put a signal inside a phase without
// racing a clock (tests/integration/run_safety_test.py).
void inject_fault_signal(const char* phase) {
  static const char* wanted = std::getenv("FTCORE_FAULT_SIGNAL_IN");
  static bool sent = false;
  if (wanted == nullptr || sent || std::strcmp(wanted, phase) != 0) return;
  sent = true;
  std::raise(SIGTERM);
}

}  // namespace

StopRequested::StopRequested(int signal, std::string phase)
    : std::runtime_error(signal_name(signal) + " during " + phase), signal_(signal), phase_(std::move(phase)) {}

int stop_signal_received() { return g_received; }

void throw_if_stop_requested(const char* phase) {
  inject_fault_signal(phase);
  if (g_received != 0) throw StopRequested(g_received, phase);
}

std::string signal_name(int signal) { return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "signal " + std::to_string(signal); }

namespace train {

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

}  // namespace train

}  // namespace ftcore
