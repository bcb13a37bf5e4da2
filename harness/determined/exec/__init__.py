"""Entry points that run inside a trial's process tree (``python3 -m determined.exec.<name>``)."""
