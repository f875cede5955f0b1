"""The sandbox: what bounds a handler call and what a program may reach. Its limits and its
trust are the session's (`Limits`, `Trust`), handed to each call (`Call.limits`, `Call.trust`),
never set for the process. (A contained kind's own event loop, which runs a third party's kind
against a proxy of the engine's `Call`, is the engine's: `decomp.runtime.engine.containment`.)

    imports.py          what `python(function="module:attr")` may import, and how
    offload.py          `Limits`; a handler's blocking work off the event loop, under a time limit
    template_growth.py  what `decomp check` warns of in a template: output without bound
    template_limits.py  what one template render may build, and for how long
    templates.py        the one sandboxed Jinja environment every template renders in
    trust.py            `Trust`: which modules and folders a program may reach
    workers.py          worker processes for user Python, killed past their deadline
"""
