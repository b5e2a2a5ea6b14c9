"""Synthetic Vox pairs for `mens generate-data`: seeded templates over word lists, every program
parse-checked and deduplicated (docs/synthetic-data.md).

    generate.py         the template table, generate(), generate_data() (the command), write_vox_tree()
    words.py            word lists: domain entities with typed fields, sample values, prompt phrasings
    templates/core.py   Draft, Ctx, render and the plain-function templates
    templates/data.py   types, ADTs, tables and endpoints, tests, MCP, AI functions, scheduled jobs
    templates/app.py    components, routes, workflows, actors, state machines, forms, mobile, tokens
    templates/mixed.py  multi-construct programs, rarer expression forms, module-level declarations
"""
