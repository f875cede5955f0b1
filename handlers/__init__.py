"""Handler kinds and what they stand on: the kind API (`Handler`, the `Call` a kind receives,
the outbound `Service`), the registry and plugin hooks every kind registers through, the
built-in kinds, the sandbox every call runs in, and the search plugin.

    base.py             `Handler`, `Options`, `LoadContext`: what every kind implements
    call.py             `Call`, the one interface between the kinds and the engine
    conversation.py     prompts as conversations, for chat models
    environment.py      `Environment`, the interface of environments with effects (ADaPT)
    files.py            a file written whole or not at all
    hooks.py            the plugin hooks (pluggy): `Specs`, `hookimpl`, the built-in table handed down
    kinds/              the built-in kinds, one module each, registered as one plugin
    plugins.py          plugins loaded into registries: the built-in table, entry points, --plugin
    registry.py         the tables a run sees: kinds, functions, models, environments, metrics
    sandbox/            what bounds a call: threads, worker processes, templates, trust
    search/             search indexes for `retrieve` and `decomp index build` (a plugin)
    service.py          `Service`: anything a handler reaches over a connection
    soft_prompts.py     a trained soft prompt's file
"""
