// MetadataCache<T> and ChildrenMirror<T> on every backend (cache_contract.cc): instantiated with
// the store contract's session sources in local_store_test.cc and zk_store_test.cc.
#pragma once

#include "metadata/tests/store_contract.h"

namespace magnetar::metadata::testing {

class MetadataCacheContractTest : public StoreContractTest {};

}  // namespace magnetar::metadata::testing
