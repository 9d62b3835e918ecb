"""Health: the probe, the rules over its facts, failure diagnosis and nvidia-smi parsing."""
