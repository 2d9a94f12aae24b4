"""Admin REST API, /metrics and magnetar-admin tests against a real broker."""
