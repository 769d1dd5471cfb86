#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "group.h"
#include "test.h"

namespace estest {

static int failures = 0;
static int printedInCase;

std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}

void fail(const char* file, int line, const std::string& what) {
  ++failures;
  if (++printedInCase > 10) return;  // the first failures of a case say enough
  const char* base = std::strrchr(file, '/');
  std::cerr << "  FAIL " << (base ? base + 1 : file) << ":" << line << ": " << what << "\n";
}

}  // namespace estest

int main(int argc, char** argv) {
  const char* filter = argc > 1 ? argv[1] : nullptr;
  int ran = 0, failedCases = 0;
  std::cout << "embedstack native tests (group probing: " << embedstack::groupImplementation() << ")\n";
  for (auto& c : estest::registry()) {
    if (filter && !std::strstr(c.name, filter)) continue;
    int before = estest::failures;
    estest::printedInCase = 0;
    const auto started = std::chrono::steady_clock::now();
    try {
      c.fn();
    } catch (const estest::AssertionStop&) {
    } catch (const std::exception& e) {
      estest::fail(__FILE__, __LINE__, std::string("unexpected exception: ") + e.what());
    }
    ++ran;
    bool ok = estest::failures == before;
    if (!ok) ++failedCases;
    // a case's seconds when it took one or more (where CI's native test time goes)
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    char secs[32] = "";
    if (took >= 1.0) std::snprintf(secs, sizeof secs, " (%.1f s)", took);
    std::cout << (ok ? "  ok   " : "  FAIL ") << c.name << secs << "\n";
  }
  std::cout << ran - failedCases << " passed, " << failedCases << " failed\n";
  return failedCases == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
