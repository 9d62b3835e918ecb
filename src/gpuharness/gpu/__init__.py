"""The GPU's facts: the one class table, nvidia-smi's output parsed, the measurement run by the service's torch, and
the judgement of how a card performs against its class (and against its peers of past deployments)."""
