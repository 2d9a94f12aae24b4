"""The shared test harness: starting brokers (broker.py, standard library only, also used by
tools/perf) and the pytest fixtures the suites import (fixtures.py)."""
