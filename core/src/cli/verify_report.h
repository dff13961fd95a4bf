// The report of `ftcore plugin verify`: one line per check, PASS, FAIL or
// SKIP (a check that cannot run here, e.g. CUDA without a device, said as
// such rather than counted as passed), and the totals that decide the exit
// code. A check is a function that returns normally (PASS, optionally with
// a detail) or throws CheckFailed / any std::exception (FAIL with its text).
#pragma once

#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>

namespace ftcore::cli {

class CheckFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown by a check that cannot run in this environment.
class CheckSkipped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void expect(bool condition, const std::string& why) {
  if (!condition) throw CheckFailed(why);
}

class VerifyReport {
 public:
  explicit VerifyReport(std::ostream& out) : out_(out) {}

  // Runs `body`; its return value is the PASS line's detail.
  void check(const std::string& component, const std::string& name, const std::function<std::string()>& body) {
    try {
      const std::string detail = body();
      ++passed_;
      out_ << "PASS " << component << ": " << name << (detail.empty() ? "" : " (" + detail + ")") << "\n";
    } catch (const CheckSkipped& e) {
      ++skipped_;
      out_ << "SKIP " << component << ": " << name << ": " << e.what() << "\n";
    } catch (const std::exception& e) {
      ++failed_;
      out_ << "FAIL " << component << ": " << name << ": " << e.what() << "\n";
    }
    out_.flush();
  }

  int passed() const { return passed_; }
  int failed() const { return failed_; }
  int skipped() const { return skipped_; }

 private:
  std::ostream& out_;
  int passed_ = 0, failed_ = 0, skipped_ = 0;
};

}  // namespace ftcore::cli
