"""The demo: a simulated estate (providers and hosts on loopback) and the `gpuharness demo` tour."""
