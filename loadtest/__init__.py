"""`make loadtest`: SPEC §9's load against gunicorn + the task worker + PostgreSQL."""
