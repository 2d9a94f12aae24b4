// `magnetar initialize-cluster-metadata`: Pulsar's `pulsar initialize-cluster-metadata`
// (PulsarClusterMetadataSetup) for the znodes a Magnetar cluster reads: the cluster, the
// "global" marker cluster, the public and pulsar tenants, and the public/default and
// pulsar/system namespaces with their bundles (docs/cluster-mode.md).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace magnetar::app {

// Adds the command to `app`. Returns a function that runs it and returns the exit code (0 ok,
// 1 error), or -1 when it was not the command given.
std::function<int()> addInitializeClusterMetadataCommand(CLI::App& app);
// `magnetar initialize-transaction-coordinator-metadata` (Pulsar's
// PulsarTransactionCoordinatorMetadataSetup): the pulsar tenant, pulsar/system and
// persistent://pulsar/system/transaction_coordinator_assign with
// --initial-num-transaction-coordinators partitions (default 16), each unless present.
std::function<int()> addInitializeTransactionCoordinatorMetadataCommand(CLI::App& app);

}  // namespace magnetar::app
