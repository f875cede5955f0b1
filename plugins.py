"""The table of built-in plugins, at the top of the package (as simonw/llm keeps its default
plugins): every kind, model scheme, environment, metric and command decomp ships is a plugin
module listed here, registered through the same hooks as a third party's (the hooks and
`hookimpl` in `decomp.handlers.hooks`, the loading in `decomp.handlers.plugins`, both low).

    builtin_plugins()  those a session registers: the kinds, TextCraft, search, the `local`,
                       `openai`, `fake` and `scripted` model schemes, the metrics em, exact,
                       set_em and f1
    command_plugins()  those that only add commands: `decomp eval steps|graph` (TaskLAMA),
                       `decomp tune`, `decomp optimize`, `decomp lsp`

Each list is a function that imports its modules when first called: importing `decomp` imports
this module, which hands the table down (`decomp.handlers.hooks.use_table`) and imports no
plugin; a session imports the first list when it fills its registry, and only the command line,
when it needs a command it does not hold, imports the second. These are real imports, which the
import-linter contracts see: this module is the package's top layer.
"""
from __future__ import annotations

from types import ModuleType

from decomp.handlers import hooks


def builtin_plugins() -> tuple[ModuleType, ...]:
    """The built-in plugins a session registers, in the order they register."""
    from decomp.handlers import kinds
    from decomp.handlers.search import plugin as search
    from decomp.programs.adapt.textcraft import plugin as textcraft
    from decomp.runtime.models import local, openai_backend
    from decomp.runtime.scoring import metrics as scoring
    from decomp.runtime.testing import fake
    from decomp.programs.adapt.textcraft import scripted

    return (kinds, textcraft, search, local, openai_backend, fake, scripted, scoring)


def command_plugins() -> tuple[ModuleType, ...]:
    """The built-in plugins that only add commands, in the order they register."""
    from decomp.editors.lsp import command as lsp
    from decomp.learning.optimize import command as optimize
    from decomp.learning.tuning import command as tune
    from decomp.programs.tasklama.taskgraph import commands as taskgraph

    return (taskgraph, tune, optimize, lsp)


#: The table `decomp.handlers.plugins` loads the built-in plugins from.
TABLE = hooks.Table(builtin_plugins, command_plugins)

hooks.use_table(TABLE)
