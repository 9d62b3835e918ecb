"""The lifecycle operations: provision, install/configure, run, retrieve, destroy, reap."""
