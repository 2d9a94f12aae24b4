// `magnetar tokens ...`: Pulsar's `pulsar tokens` (TokensCliUtils) with its options, key files
// and output, so keys and tokens made by either tool work with both brokers.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace magnetar::app {

// Adds the `tokens` command and its subcommands to `app`. Returns a function that runs the
// parsed subcommand and returns the exit code (0 ok, 1 error as Pulsar's tool), or -1 when
// `tokens` was not the command given.
std::function<int()> addTokensCommand(CLI::App& app);

}  // namespace magnetar::app
