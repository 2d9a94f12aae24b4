"""The integration tests start their own brokers (tests/harness): this puts tests/ on the import
path for `harness` and offers its `magnetar` and `restartable` fixtures."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import harness.broker  # noqa: E402
from harness.fixtures import magnetar, restartable  # noqa: E402, F401 (fixtures)

# Every broker this suite stops with SIGTERM must exit 0 (issue 52).
harness.broker.check_clean_exit = True
