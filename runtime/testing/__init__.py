"""Test doubles shipped with the package, apart from the real backends: the fake model (queued
answers, prompt maps, scripted decomposers; the `fake:` scheme) and an OpenAI-compatible mock
HTTP server on 127.0.0.1 (faults, latency, statistics)."""
