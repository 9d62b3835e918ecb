"""ComfyUI, in its own home: its client (`client`), how a workflow's graph fits a server (`workflow_fit`), and
what the harness knows of a ComfyUI server without asking one: its node catalog (`catalog`), how it validates a
graph (`validation`) and the causes of a refusal (`problems`). Those three are pure (they import only the core
and each other), so the simulator's ComfyUI answers with the same knowledge (tests/test_layers.py)."""
