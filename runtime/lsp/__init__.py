"""`decomp lsp`: the language server of `.decomp` files and few-shot prompt files (diagnostics
as you type, hover, definition, references, completion, outline). `server` runs it, `analysis`
checks a document in the worker process, `index`, `tokens`, `features` and `completion` answer
the requests; `command` is the `decomp lsp` command, a built-in plugin."""
