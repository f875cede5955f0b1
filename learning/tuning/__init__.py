"""`decomp tune`: soft-prompt tuning of one prompt or score handler on the local model.

    examples.py   a program's handler and a JSONL file -> (prompt text, target text) pairs
    base.py       the model to tune on: a GGUF file loaded in transformers, llama.cpp's tokenizer
    trainer.py    the torch loop: one soft prompt per size, the best validation loss kept
    api.py        `tune`: one handler's soft prompt trained and written
    command.py    the click command, registered through the plugin table

Only `trainer.py` and `base.py` import torch, transformers (and only when called): `decomp run`
never loads them. The file written is `decomp.handlers.soft_prompts`' format.
"""
