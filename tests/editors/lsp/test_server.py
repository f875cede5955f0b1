"""`decomp lsp` driven over stdio by a real LSP client (pytest-lsp): diagnostics at their exact
ranges in every file they are in, a fix that clears them, hover, definition, references,
completion and the outline."""
from __future__ import annotations

import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.editors.lsp.lsp_helpers import (
    MAIN, SERVER, at, change_doc, diagnostics, open_doc, span, uri, write_program,
)

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(types.InitializeParams(capabilities=types.ClientCapabilities()))
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_program(tmp_path_factory.mktemp("program"))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def opened(client, files):
    open_doc(client, files["main"])
    await diagnostics(client, files["main"], lambda d: len(d) == 2)
    return uri(files["main"])


async def test_the_documents_problems_at_their_exact_ranges(client, files, opened):
    found = {d.message.split("\n")[0]: d for d in client.diagnostics[opened]}
    nope = found["unknown handler [nope]"]
    assert span(nope) == (9, 6, 9, 12)  # `[nope]` on `  QS: [nope] #2`
    assert nope.severity == types.DiagnosticSeverity.Error and nope.source == "decomp"
    assert "expected one of: broken, letters, plan, qa, split, upper" in nope.message
    ref = found["#4 refers to a step that has not run at this point"]
    assert span(ref) == (10, 11, 10, 13)
    assert "#1, #2, #3" in ref.message


async def test_problems_of_imported_and_fewshot_files_show_on_their_own_uris(client, files, opened):
    helper = await diagnostics(client, files["helpers"], lambda d: len(d) == 1)
    assert span(helper[0]) == (1, 41, 1, 42) and "invalid pattern '(unclosed'" in helper[0].message
    plan = await diagnostics(client, files["plan"], lambda d: len(d) == 1)
    assert span(plan[0]) == (3, 4, 3, 16) and "unknown operator '(frobnicate)'" in plan[0].message


async def test_hover_on_a_step_reference_shows_the_step_and_its_handler(client, opened):
    found = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=opened), position=at(8, 25)))  # `#1` on the foreach line
    assert found is not None
    assert "QS: [split] #question" in found.contents.value and "step 1 (line 8)" in found.contents.value
    assert "kind `regex`" in found.contents.value and 'pattern="(\\\\w)"' in found.contents.value
    assert (found.range.start.character, found.range.end.character) == (24, 26)


async def test_hover_on_an_input_a_handler_a_kind_and_an_operator(client, opened):
    async def hover(line, character):
        found = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=opened), position=at(line, character)))
        return found.contents.value if found is not None else None

    question = await hover(7, 19)
    assert "parameter `question` of program `letters`" in question and "row's field `question`" in question
    upper = await hover(8, 19)  # [upper], declared in helpers.decomp
    assert "handler upper = regex" in upper and "helpers.decomp:1" in upper
    kind = await hover(3, 17)  # prompt
    assert "handler kind `prompt`" in kind and "- `max_tokens`: `int = 200`" in kind and "- `file`: " in kind
    operator = await hover(8, 9)  # (foreach)
    assert operator.startswith("`(foreach)` = `(project_values)`: runs the handler once per item")
    assert "\\[item, answer\\]" in operator  # markdown that shows the brackets
    option = await hover(3, 41)  # max_tokens=
    assert option == "option `max_tokens` of kind `prompt`: `int = 200`"
    assert await hover(0, 3) is None  # a comment


async def test_definition_of_handlers_steps_imports_and_files(client, files, opened):
    async def where(line, character):
        found = await client.text_document_definition_async(types.DefinitionParams(
            text_document=types.TextDocumentIdentifier(uri=opened), position=at(line, character)))
        return [(f.uri, f.range.start.line, f.range.start.character) for f in found]

    assert await where(8, 19) == [(uri(files["helpers"]), 0, 8)]  # [upper] -> its declaration, another file
    assert await where(10, 7) == [(opened, 3, 8)]  # [qa]
    assert await where(9, 13) == [(opened, 8, 2)]  # #2 -> the foreach step
    assert await where(10, 19) == [(opened, 6, 26)]  # #sep -> the parameter
    assert await where(1, 12) == [(uri(files["helpers"]), 0, 0)]  # import "helpers.decomp"
    assert await where(3, 28) == [(uri(files["qa"]), 0, 0)]  # file="qa.txt"
    assert await where(14, 7) == [(opened, 6, 8)]  # main letters


async def test_references_of_a_handler_in_every_file(client, files, opened):
    found = await client.text_document_references_async(types.ReferenceParams(
        text_document=types.TextDocumentIdentifier(uri=opened), position=at(2, 10),
        context=types.ReferenceContext(include_declaration=True)))
    places = sorted((f.uri, f.range.start.line, f.range.start.character, f.range.end.character) for f in found)
    assert places == sorted([(opened, 2, 8, 13), (opened, 7, 7, 12), (uri(files["plan"]), 1, 5, 10)])
    without = await client.text_document_references_async(types.ReferenceParams(
        text_document=types.TextDocumentIdentifier(uri=opened), position=at(2, 10),
        context=types.ReferenceContext(include_declaration=False)))
    assert len(without) == 2


async def _labels(client, doc_uri, line, character):
    found = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=doc_uri), position=at(line, character)))
    return {item.label: item for item in found.items}


async def test_completion_of_handlers_operators_kinds_options_and_references(client, files, tmp_path):
    text = MAIN.replace("  QS: [EOQ] #2\n", "  QS: [\n  QS: (fore\n  QS: [qa] #\n  QS: [EOQ] #2\n")
    text += 'handler other = prom\nhandler more  = decomposer(file="plan.txt", max_steps=4, \n'
    path = files["main"].with_name("typing.decomp")
    doc = open_doc(client, path, text)
    lines = text.split("\n")
    bracket = lines.index("  QS: [")
    handlers = await _labels(client, doc, bracket, 7)
    assert {"split", "qa", "plan", "upper", "broken", "letters", "EOQ"} <= set(handlers)
    operators = await _labels(client, doc, bracket + 1, 11)
    assert {"foreach", "foreach_merge", "select", "filter", "plan"} <= set(operators)
    assert operators["foreach"].kind == types.CompletionItemKind.Operator
    refs = await _labels(client, doc, bracket + 2, 12)
    assert set(refs) == {"#1", "#2", "#3", "#4", "#question", "#sep"}  # the steps before it, the parameters
    kinds = await _labels(client, doc, lines.index("handler other = prom"), 20)
    assert {"prompt", "decomposer", "regex", "python", "program", "retrieve"} <= set(kinds)
    options = await _labels(client, doc, lines.index("handler other = prom") + 1, 56)
    assert "nearest" in options and "max_tokens" in options
    assert "file" not in options and "max_steps" not in options  # written already


async def test_completion_of_paths_offers_files_and_bundled_programs(client, files):
    text = 'import "'
    path = files["main"].with_name("paths.decomp")
    doc = open_doc(client, path, text)
    found = await _labels(client, doc, 0, 8)
    assert "helpers.decomp" in found and "qa.txt" not in found
    bundled = found["decomp/letter_cat_symbolic"]
    assert bundled.insert_text.endswith("programs/decomp/letter_cat_symbolic.decomp")
    assert (path.parent / bundled.insert_text).resolve().is_file()


async def test_the_outline_lists_handlers_programs_and_steps(client, opened):
    found = await client.text_document_document_symbol_async(types.DocumentSymbolParams(
        text_document=types.TextDocumentIdentifier(uri=opened)))
    names = [(s.name, s.kind) for s in found]
    assert names == [("split", types.SymbolKind.Function), ("qa", types.SymbolKind.Function),
                     ("plan", types.SymbolKind.Function), ("letters", types.SymbolKind.Class),
                     ("letters", types.SymbolKind.Key)]
    program = found[3]
    assert [c.name for c in program.children] == ["#1", "#2", "#3", "#4", "end"]
    assert program.selection_range.start == at(6, 8)


async def test_a_fix_clears_the_problem_and_rapid_changes_check_only_the_last(client, files):
    path = files["main"].with_name("fixing.decomp")
    text = MAIN.replace('import "helpers.decomp"\n', 'import "helpers.decomp"\n\n')  # its own file, its own lines
    doc = open_doc(client, path, text)
    await diagnostics(client, doc, lambda d: any("[nope]" in x.message for x in d))
    published = []

    class Recorder(dict):
        def __setitem__(self, key, value):
            if key == doc:
                published.append(list(value))
            dict.__setitem__(self, key, value)
    client.diagnostics = Recorder(client.diagnostics)
    try:
        for version, fixed in enumerate(["[no", "[nop", "[split", "[split]"], start=2):
            change_doc(client, doc, text.replace("[nope]", fixed + ("]" if not fixed.endswith("]") else "")), version)
        final = text.replace("[nope]", "[split]").replace("#4", "#3")
        change_doc(client, doc, final, 6)
        await diagnostics(client, doc, lambda d: len(d) == 0)
    finally:
        client.diagnostics = dict(client.diagnostics)
    assert published == [[]]  # one publish: the four texts typed past were never checked


async def test_an_untitled_document_is_checked_too(client):
    doc = open_doc(client, None, "handler a = regex(pattern=\"(x\")\nmain a\n", doc_uri="untitled:Untitled-1")
    found = await diagnostics(client, doc, lambda d: len(d) == 1)
    assert "invalid pattern" in found[0].message and span(found[0])[0] == 0


async def test_closing_a_document_clears_what_it_published(client, files):
    path = files["main"].with_name("closing.decomp")
    doc = open_doc(client, path, "handler a = nosuchkind()\nmain a\n")
    await diagnostics(client, doc, lambda d: len(d) == 1)
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=doc)))
    await diagnostics(client, doc, lambda d: len(d) == 0)


async def test_ranges_count_utf16_code_units_after_characters_beyond_the_bmp(client, files):
    text = 'handler qa = regex(pattern="(x)")\nprogram p(question) {\n  QS: [qa] \U0001F600 #9\n}\nmain p\n'
    doc = open_doc(client, files["main"].with_name("emoji.decomp"), text)
    found = await diagnostics(client, doc, lambda d: len(d) == 1)
    assert span(found[0]) == (2, 14, 2, 16)  # `#9` is at code point 13, UTF-16 unit 14 (the emoji counts 2)
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=doc), position=at(2, 7)))
    assert "handler qa = regex" in hover.contents.value


async def test_definition_of_a_model_and_a_program_named_in_option_strings(client, files):
    text = ('model small = "fake:answers.json"\n'
            'handler a = prompt(text="Q: x", model="small")\n'
            'handler b = program(name="p", file="helpers.decomp")\n'
            'program p(question) {\n  QS: [a] #question\n}\nmain p\n')
    doc = open_doc(client, files["main"].with_name("models.decomp"), text)

    async def where(line, character):
        found = await client.text_document_definition_async(types.DefinitionParams(
            text_document=types.TextDocumentIdentifier(uri=doc), position=at(line, character)))
        return [(f.uri, f.range.start.line, f.range.start.character) for f in found]
    assert await where(1, 41) == [(doc, 0, 0)]  # model="small" -> the model's declaration
    assert await where(2, 27) == [(doc, 3, 8)]  # name="p" -> the program
    assert await where(2, 40) == [(uri(files["helpers"]), 0, 0)]  # file="helpers.decomp"
