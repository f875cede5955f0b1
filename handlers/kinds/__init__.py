"""The built-in handler kinds, one module each, registered as a plugin (listed in the table of
built-in plugins, `decomp.plugins`) exactly as a third-party package registers its own.

    calculator.py          `calculator`: safe arithmetic on the sub-query
    decomposer.py          `decomposer`: a model writes the program one `QS:` line at a time
    environment.py         `environment`: acts on the row's environment; `ActsOnEnvironment`
    executor.py            `executor`: ADaPT's ReAct executor over an environment
    fewshot.py             few-shot examples read and checked (prompt, decomposer)
    program.py             `program`: a fixed program of a .decomp file, used as a handler
    prompt.py              `prompt`: a few-shot prompt or a sandboxed Jinja template
    python.py              `python`: what a Python function returns
    regex.py               `regex`: an answer pulled out of the sub-query by a pattern
    retrieve.py            `retrieve`: BM25 top-k paragraphs for the sub-query
    score.py               `score`: the log-likelihood of the sub-query under a model
    soft_prompt_option.py  the `soft_prompt=FILE` option of `prompt` and `score`
    tools.py               handlers as tools a prompt on a chat model may call
"""
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
