"""Model backends: outbound services of kind "model". Each registers its scheme in the registry,
as a plugin would (the replay model of dry runs aside: no scheme names it).

    base.py              what a backend is: `Model`, `Request`, `Completion`, `ModelSettings`, `Backend`
    guided.py            constrained decoding on the embedded model (llguidance)
    local.py             `local:`: Gemma 3 270M (GGUF) in process, by llama-cpp-python
    openai_backend.py    `openai:`: any OpenAI-compatible endpoint
    openai_transport.py  how `OpenAIModel` sends a request: the transports of `transport=`
    prefix_states.py     prefix reuse for the embedded model's KV states
    prices.py            prices of models per million tokens: cost figures, `--max-cost`
    replay.py            `ReplayModel`: answers from the prompts' own examples, for dry runs
"""
