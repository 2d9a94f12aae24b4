// ZkStore: metadata::Store on Apache ZooKeeper through libzookeeper-mt (Debian's
// libzookeeper-mt-dev). One ZooKeeper session per ZkStore. The library runs the session on two
// threads of its own (I/O and completion); every completion and watch is posted from there to the
// executor the caller named, so no call blocks an event loop or ml-worker.
//
// Values and paths are written as they are: ZooKeeper's own data model, Pulsar's znode layout is
// the caller's (docs/metadata-format.md). Watches are ZooKeeper's one-shot watches: each get,
// exists and getChildren sets one (get on a missing node sets an exists watch, as Pulsar's
// ZKMetadataStore does). When the session expires, its ephemeral nodes are gone: listeners get
// kSessionLost, the store opens a new session and reports kSessionReestablished.
#pragma once

#include <memory>
#include <string>

#include "metadata/store.h"
#include "setting_defaults.h"

namespace magnetar::metadata {

struct ZkConfig {
  // "host:port[,host:port...][/chroot]", with or without Pulsar's "zk:" prefix
  // (metadataStoreUrl).
  std::string url;
  // metadataStoreSessionTimeoutMillis (defaults: src/config/settings.def, Pulsar's).
  int sessionTimeoutMs = static_cast<int>(setting_defaults::metadataStoreSessionTimeoutMillis);
  // How long open() waits for the first session (the broker: the session timeout, at least 5 s).
  int connectTimeoutMs = static_cast<int>(setting_defaults::metadataStoreSessionTimeoutMillis);
  // metadataStoreOperationTimeoutSeconds * 1000: a call without an answer by then ends with
  // kTimeout naming the path (a late answer is dropped); 0: no timeout.
  int operationTimeoutMs = setting_defaults::metadataStoreOperationTimeoutSeconds * 1000;
};

// "zk:h1:2181,h2:2181/chroot" -> "h1:2181,h2:2181/chroot"; kInvalidArgument for an empty or
// malformed host list (a host without a port, a port outside 1-65535).
Result<std::string> parseZkUrl(const std::string& url);

// Connects and waits for the session (up to connectTimeoutMs; kTimeout naming the servers when
// ZooKeeper does not answer). Thread: any but an event loop (it blocks).
Result<std::unique_ptr<Store>> openZkStore(const ZkConfig& config);

// Tests only: ends `store`'s session from a second connection that takes over its id and closes
// (ZooKeeper's way to expire a session on demand); the store then sees kSessionLost and opens a
// new session. kInvalidArgument when store is not a ZkStore. Blocks until the store runs on a new
// session (retried up to 5 times: its own reconnect can win the race for the session).
Status expireZkSessionForTesting(Store* store);

}  // namespace magnetar::metadata
