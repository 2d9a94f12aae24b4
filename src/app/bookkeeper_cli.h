// `magnetar bookkeeper --metadata-service-uri URI simpletest|readledger|ledgermetadata`: the
// `bookkeeper shell` commands of those names (BookKeeper 4.17), with their flags and output, on
// Magnetar's BookKeeper client, so an operator can check a cluster with either tool.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace magnetar::app {

// Adds the `bookkeeper` command to `app`. Returns a function that runs the parsed subcommand and
// returns the exit code (0 ok, 1 failure), or -1 when `bookkeeper` was not the command given.
std::function<int()> addBookKeeperCommand(CLI::App& app);

// BookKeeper's shell spells long flags with one dash ("-ledgerid"): rewrites those that follow
// `bookkeeper` in args (argv order) to CLI11's "--ledgerid".
void rewriteBookKeeperShellFlags(std::vector<std::string>& args);

}  // namespace magnetar::app
