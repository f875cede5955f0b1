"""Editor support: the language server (a Python package) beside the VS Code extension and its
TextMate grammars (vscode/, not part of the Python package).

    lsp/  `decomp lsp`: the language server
"""
