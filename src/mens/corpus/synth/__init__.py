"""Synthetic Vox (and Python) pairs for `mens generate-data`: seeded templates over word lists,
every program parse-checked and deduplicated (docs/synthetic-data.md).

    generate.py         the template table, LANGS, generate(), write_vox_tree()
    stage.py            generate_data() (the command, with a report) and the pipeline's generate-data stage
    words.py            word lists: domain entities with typed fields, sample values, prompt phrasings
    templates/core.py   Draft, Ctx (with made-up names for made-up subjects), render, the plain-function templates
    templates/data.py   types, ADTs, tests, MCP, AI functions, scheduled jobs
    templates/tables.py tables, indexes, query/mutation endpoints, server functions
    templates/app.py    components, fragments, loading views, forms, mobile, tokens, @v0
    templates/flow.py   routes, url maps, workflows and activities, actors, state machines
    templates/mixed.py  multi-construct programs, rarer expression forms, module-level declarations
    templates/python.py the plain-function templates, a dataclass and constants in Python (--lang python)
"""
