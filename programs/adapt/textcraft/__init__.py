"""TextCraft (ADaPT's crafting benchmark), a plugin.

    env.py       the `textcraft` environment: craft a goal item from a task's commands
    generate.py  new tasks, with goals of a chosen recipe depth
    plugin.py    registers the environment, the kinds and `decomp textcraft generate`
    recipes.py   recipes: parsing, tags, depth, sub-task text and the symbolic solver
    symbolic.py  the symbolic `textcraft_executor` / `textcraft_planner` kinds (no model)
"""
