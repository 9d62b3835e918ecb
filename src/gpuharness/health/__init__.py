"""Health, the ready gate: the table of health checks, their rules over the probe's facts, the ready decision and
the gate that applies it (the only path to `ready`)."""
