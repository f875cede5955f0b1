"""TextCraft (ADaPT's crafting benchmark): the `textcraft` environment, its recipes and solver,
the symbolic `textcraft_executor` / `textcraft_planner` kinds and a task generator; `plugin`
registers the environment, the kinds and the `decomp textcraft` command."""
