"""Programs that learn from data: few-shot demonstrations bootstrapped from traces and soft
prompts tuned on rows, each a built-in plugin with its command.

    optimize/  `decomp optimize`: few-shot demonstrations bootstrapped from traces
    tuning/    `decomp tune`: soft-prompt tuning
"""
