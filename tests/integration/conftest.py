"""The integration tests start their own brokers (tests/harness): this puts tests/ on the import
path for `harness` and offers its `magnetar` fixture."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness.fixtures import magnetar  # noqa: E402, F401 (fixture)
