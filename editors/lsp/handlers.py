"""The LSP methods `decomp lsp` answers, each a thin turn from protocol types to
`decomp.editors.lsp.features` / `completion` and back."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from lsprotocol import types

from decomp.editors.lsp import completion, features
from decomp.editors.lsp.analysis import Settings
from decomp.editors.lsp.editor_trust import editor_trusted_folders
from decomp.editors.lsp.server import _ITEM_KIND, _SYMBOL_KIND, CHECK_TIMEOUT_S, DecompServer, answering
from decomp.editors.lsp.tokens import token_at

TRIGGERS = ["[", "(", "#", "=", "\"", ","]


def make_server(settings: Settings = Settings(), check_timeout: float = CHECK_TIMEOUT_S) -> DecompServer:
    """The server with every feature registered."""
    server = DecompServer(settings, check_timeout)
    register(server)
    return server


def register(server: DecompServer) -> None:
    """Register the document events and the requests on `server`."""

    @server.feature(types.INITIALIZE)
    def initialize(ls: DecompServer, params: types.InitializeParams) -> None:
        ls.settings = trusting(ls.settings, editor_trusted_folders(params))  # before any document is checked

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: DecompServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: DecompServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: DecompServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: DecompServer, params: types.DidCloseTextDocumentParams) -> None:
        pending = ls.waiting.pop(params.text_document.uri, None)
        if pending is not None:
            pending.cancel()
        ls.retract(params.text_document.uri)

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: DecompServer, params) -> None:
        ls.close()

    server.feature(types.TEXT_DOCUMENT_HOVER)(answering(hover))
    server.feature(types.TEXT_DOCUMENT_DEFINITION)(answering(definition))
    server.feature(types.TEXT_DOCUMENT_REFERENCES)(answering(references))
    server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=TRIGGERS))(
        answering(complete))
    server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)(answering(document_symbols))


def trusting(settings: Settings, folders: tuple[str, ...]) -> Settings:
    """`settings` whose checker may import the Python of `folders` too (the editor's trust)."""
    return replace(settings, trusted_folders=tuple(dict.fromkeys((*settings.trusted_folders, *folders))))


async def hover(ls: DecompServer, params: types.HoverParams) -> types.Hover | None:
    uri = params.text_document.uri
    lines, line, col = await ls.position(uri, params.position)
    found = features.hover(await ls.index(uri), lines, line, col)
    if found is None:
        return None
    text, token = found
    place = features.Place(Path(), line, token.start, line, token.end)
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text),
                       range=ls.to_range(uri, place))


async def definition(ls: DecompServer, params: types.DefinitionParams) -> list[types.Location]:
    uri = params.text_document.uri
    lines, line, col = await ls.position(uri, params.position)
    return await ls.locations(features.definition(await ls.index(uri), lines, line, col), uri)


async def references(ls: DecompServer, params: types.ReferenceParams) -> list[types.Location]:
    uri = params.text_document.uri
    lines, line, col = await ls.position(uri, params.position)
    index = await ls.index(uri)
    token = token_at(lines[line], col, index is not None and index.fewshot is not None) \
        if line < len(lines) else None
    if token is None or index is None or token.text not in index.decls and token.kind != "handler":
        return []
    places = await ls.off_loop(completion.references, index, "\n".join(lines), token.text,
                               params.context.include_declaration)  # reads the imported files
    return await ls.locations(places, uri)


async def complete(ls: DecompServer, params: types.CompletionParams) -> types.CompletionList:
    uri = params.text_document.uri
    lines, line, col = await ls.position(uri, params.position)
    index = await ls.index(uri)
    items = await ls.off_loop(completion.complete, index, "\n".join(lines), lines, line, col)  # lists folders
    return types.CompletionList(is_incomplete=False, items=[
        types.CompletionItem(label=item.label, kind=_ITEM_KIND[item.kind], detail=item.detail or None,
                             insert_text=item.insert) for item in items])


async def document_symbols(ls: DecompServer, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
    uri = params.text_document.uri
    return [_symbol(ls, uri, s) for s in features.symbols(await ls.index(uri))]


def _symbol(ls: DecompServer, uri: str, symbol: features.Symbol) -> types.DocumentSymbol:
    return types.DocumentSymbol(name=symbol.name or "?", kind=_SYMBOL_KIND[symbol.kind], detail=symbol.detail,
                                range=ls.to_range(uri, symbol.place),
                                selection_range=ls.to_range(uri, symbol.selection),
                                children=[_symbol(ls, uri, c) for c in symbol.children] or None)
