"""`decomp lsp`: the language server of `.decomp` files and few-shot prompt files (diagnostics
as you type, hover, definition, references, completion, outline), a built-in plugin.

    analysis.py      a document's problems as `decomp check` finds them (the worker process)
    command.py       the `decomp lsp` command
    completion.py    completion and references
    editor_trust.py  what the editor trusts, from its `initialize` request
    features.py      hover, go to definition and document symbols
    handlers.py      the LSP methods answered, each a thin turn to features / completion
    hover_types.py   the answer types hover shows for `#n` and `#name`
    index.py         a document's syntax tree and the declarations it sees
    readers.py       the server's file reads, on threads of their own
    server.py        the server (pygls): documents checked as they change
    stdio.py         standard input and output, framed as the protocol frames a message
    tokens.py        what sits at a place in a line, read from the line alone
"""
