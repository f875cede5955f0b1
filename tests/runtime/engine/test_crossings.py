"""How often one prompt step inside a program crosses between the engine (decomp.runtime) and the
handler kinds (decomp.handlers) on its way to the model: every Python call from one side to the
other, from the start of the row to the model request, read with a profile hook.

Before the engine interface (commit c0fc0a6) the same row made 10 such calls: the program kind
lived under handlers/ and called back into the interpreter, the prompt kind looked its model up
on the session, built the model's trace node itself and called `Session.complete`, and the
model backend lived under handlers/ again. Now each kind is entered once and calls back once: the
program kind (an ordinary kind under handlers/ again, issue 21, but running its body through
`Call.run_program` instead of importing the interpreter) and the prompt kind."""
from __future__ import annotations

import asyncio
import sys

from decomp import FakeModel, Session
from decomp.runtime.models.base import Completion, Request

PROGRAM = '''
handler ask = prompt(text="Q: 1+1\\nA: 2", max_tokens=8)
program main(question) {
    QS: [ask] #question
}
main main
'''


def layer(module: str) -> str | None:
    if module.startswith("decomp.handlers"):
        return "handlers"
    if module.startswith("decomp.runtime"):
        return "engine"
    return None


class StopAtRequest(FakeModel):
    def __init__(self):
        super().__init__(default="4")
        self.requested = False

    async def complete(self, request: Request) -> Completion:
        self.requested = True
        return await super().complete(request)


def test_each_kind_on_the_way_is_entered_once_and_calls_back_once(tmp_path):
    model = StopAtRequest()
    session = Session(model=model)
    module = session.load(tmp_path / "p.decomp", text=PROGRAM)
    crossings: list[str] = []

    def profile(frame, event, arg):
        if model.requested or event != "call" or frame.f_back is None:
            return
        caller, callee = frame.f_back, frame
        sides = layer(caller.f_globals.get("__name__", "")), layer(callee.f_globals.get("__name__", ""))
        if None not in sides and sides[0] != sides[1]:
            crossings.append(f"{caller.f_code.co_qualname} -> {callee.f_code.co_qualname}")

    async def row():
        sys.setprofile(profile)
        try:
            return await session.arun(module, {"question": "2+2"})
        finally:
            sys.setprofile(None)

    result = asyncio.run(row())
    assert (result.answer, result.error) == (4, None)
    assert crossings == ["Session._entry -> ProgramHandler.run_main", "ProgramHandler.execute -> EngineCall.run_program",
                         "run_kind -> PromptHandler.run", "PromptHandler._sample -> EngineCall.complete"]
