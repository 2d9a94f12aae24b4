// main() for a benchmark binary whose code logs: Google Benchmark's main with the log at "warn",
// so that info lines do not interleave with the results table.
#pragma once

#include <benchmark/benchmark.h>

#include "base/logging.h"

#define MAGNETAR_QUIET_BENCHMARK_MAIN()  \
  int main(int argc, char** argv) {      \
    magnetar::initLogging("warn");       \
    benchmark::Initialize(&argc, argv);  \
    benchmark::RunSpecifiedBenchmarks(); \
    benchmark::Shutdown();               \
    return 0;                            \
  }
