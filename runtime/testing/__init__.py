"""Test doubles shipped with the package, apart from the real backends.

    fake.py          the fake model (`fake:`): queued answers, prompt maps, scripted decomposers
    fake_file.py     a fake model's JSON file, read and checked
    llama_server.py  llama-cpp-python's OpenAI-compatible server as a child process
    misbehaving.py   an HTTP server that misbehaves on purpose, for clients' deadlines
    mock_server.py   an OpenAI-compatible mock server on 127.0.0.1 (faults, latency, statistics)
    tiny_gguf.py     a tiny random Gemma 3 written as a real GGUF file
"""
