"""Handler kinds and what they stand on: the kind API (`Handler`, the `Call` a kind receives,
the outbound `Service`), the registry and plugin table every kind registers through, the
built-in kinds, and two plugins (TextCraft, search).

    base.py             `Handler`, `Options`, `LoadContext`: what every kind implements
    call.py             `Call`, the one interface between the kinds and the engine
    conversation.py     prompts as conversations, for chat models
    environment.py      `Environment`, the interface of environments with effects (ADaPT)
    files.py            a file written whole or not at all
    imports.py          what `python(function="module:attr")` may import, and how
    kinds/              the built-in kinds, one module each, registered as one plugin
    offload.py          a handler's blocking work off the event loop, under a time limit
    hooks.py            the plugin hooks (pluggy): `Specs`, `hookimpl`, the built-in table handed down
    plugins.py          plugins loaded into registries: the built-in table, entry points, --plugin
    registry.py         the tables a run sees: kinds, functions, models, environments, metrics
    search/             search indexes for `retrieve` and `decomp index build` (a plugin)
    service.py          `Service`: anything a handler reaches over a connection
    soft_prompts.py     a trained soft prompt's file
    template_growth.py  what `decomp check` warns of in a template: output without bound
    template_limits.py  what one template render may build, and for how long
    templates.py        the one sandboxed Jinja environment every template renders in
    textcraft/          TextCraft: its environment, symbolic kinds and command (a plugin)
    trust.py            `Trust`: which modules and folders a program may reach
    workers.py          worker processes for user Python, killed past their deadline
"""
