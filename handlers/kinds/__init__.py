"""The built-in handler kinds, one module each, registered as a plugin (`BUILTIN_PLUGINS` in
`decomp.handlers.plugins`) exactly as a third-party package registers its own."""
from decomp.handlers.kinds.calculator import CalculatorHandler
from decomp.handlers.kinds.decomposer import DecomposerHandler
from decomp.handlers.kinds.environment import EnvironmentHandler
from decomp.handlers.kinds.executor import ExecutorHandler
from decomp.handlers.kinds.program import ProgramHandler
from decomp.handlers.kinds.prompt import PromptHandler
from decomp.handlers.kinds.python import PythonHandler
from decomp.handlers.kinds.regex import RegexHandler
from decomp.handlers.kinds.retrieve import RetrieveHandler
from decomp.handlers.kinds.score import ScoreHandler
from decomp.handlers.plugins import hookimpl

KINDS = (PromptHandler, DecomposerHandler, ProgramHandler, RegexHandler, CalculatorHandler, PythonHandler,
         ScoreHandler, RetrieveHandler, EnvironmentHandler, ExecutorHandler)


@hookimpl
def register_kinds(register):
    for kind in KINDS:
        register(kind)
