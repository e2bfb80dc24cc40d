"""Optional framework integrations (Django, Flask); nothing here is imported by ``jetstream_sync``."""
